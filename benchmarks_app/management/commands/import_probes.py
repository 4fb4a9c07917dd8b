from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.services.probes import ProbeFormatError, probe_suite_import
from scoring.probes.io import FORMATS, detect_format


class Command(BaseCommand):
    help = "Import a probe suite from JSONL or an XSTest prompts CSV (all or nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--suite", required=True, help="Suite name (created if missing).")
        parser.add_argument("--format", choices=FORMATS, help="Default: from the file name.")
        parser.add_argument("--description", default="")

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
            )
        except ProbeFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Suite '{result.suite.name}': {result.created} probe(s) created, "
                f"{result.updated} updated, {result.suite.probes.count()} in total."
            )
        )
