from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.services.probes import (
    ProbeFormatError,
    default_refusal_signal,
    probe_suite_import,
)
from scoring.probes.io import FORMATS, detect_format
from scoring.probes.refusal import REFUSAL_SIGNALS


class Command(BaseCommand):
    help = "Import a probe suite from JSONL or an XSTest prompts CSV (all or nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--suite", required=True, help="Suite name (created if missing).")
        parser.add_argument("--format", choices=FORMATS, help="Default: from the file name.")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--refusal-signal",
            choices=REFUSAL_SIGNALS,
            help="What decides whether a response refuses: the boundary rules, the trained "
            "classifier, or an LLM judge (openai, paid). Default: an existing suite keeps its "
            f"own; a new one gets the best held out ({default_refusal_signal()} here).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        text = path.read_text(encoding="utf-8")
        fmt = options["format"] or detect_format(path.name, text)
        try:
            result = probe_suite_import(
                name=options["suite"],
                text=text,
                fmt=fmt,
                source_name=path.name,
                description=options["description"],
                refusal_signal=options["refusal_signal"],
            )
        except ProbeFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Suite '{result.suite.name}': {result.created} probe(s) created, "
                f"{result.updated} updated, {result.suite.probes.count()} in total; "
                f"refusal signal: {result.suite.refusal_signal}."
            )
        )
        if result.suite.refusal_signal == "openai" and not (
            settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL
        ):
            self.stderr.write(
                "Warning: the openai refusal signal needs OPENAI_API_KEY (or OPENAI_BASE_URL "
                "for a compatible server); runs of this suite will fail without one."
            )
