"""Add (or replace) a judge record from the command line; the admin curates the same records."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.models import JudgeKind
from benchmarks_app.services.judge_records import (
    JudgeBundleError,
    JudgeRecordError,
    judge_probe_summary,
    judge_record_check,
    judge_record_create,
    judge_record_import_bundle,
)


class Command(BaseCommand):
    help = (
        "Add a judge record: runs made with --judge NAME are judged by it in every worker, "
        "whatever that worker's OPENAI_* settings. The API key is never stored: --api-key-env "
        "names the variable that holds it in the workers' environment."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="what --judge NAME and the boards call it")
        parser.add_argument("--kind", choices=list(JudgeKind.values), default=None)
        parser.add_argument(
            "--base-url", default="", help="OpenAI-compatible base URL (…/v1); replay: the folder"
        )
        parser.add_argument("--model", default="", help="model name (default JUDGE_MODEL)")
        parser.add_argument(
            "--api-key-env",
            default="OPENAI_API_KEY",
            help="NAME of the environment variable holding the API key (never the key)",
        )
        parser.add_argument("--max-answer-tokens", type=int)
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--concurrency", type=int)
        parser.add_argument("--timeout", type=float, dest="timeout_s", help="seconds per call")
        parser.add_argument("--replace", action="store_true", help="update a record of that name")
        parser.add_argument(
            "--check", action="store_true", help="ask the server one probe call and store it"
        )
        parser.add_argument(
            "--from-bundle",
            metavar="BUNDLE",
            help="a replay judge with an audit run bundle's verdicts (written to --base-url, "
            "default MEDIA_ROOT/replays/NAME): re-runs the entry without a call",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["from_bundle"]:
            self._from_bundle(options)
            return
        try:
            record = judge_record_create(
                name=options["name"],
                kind=options["kind"] or JudgeKind.OPENAI,
                base_url=options["base_url"],
                model=options["model"],
                api_key_env=options["api_key_env"],
                max_answer_tokens=options["max_answer_tokens"],
                temperature=options["temperature"],
                concurrency=options["concurrency"],
                timeout_s=options["timeout_s"],
                replace=options["replace"],
            )
        except JudgeRecordError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Judge record {record.name!r} ({record.kind}) saved.")
        if options["check"]:
            found = judge_record_check(record=record)
            self.stdout.write(f"Check: {judge_probe_summary(found)}")
            if not found.get("ok"):
                raise CommandError(f"judge {record.name!r} did not answer the check")

    def _from_bundle(self, options: dict[str, Any]) -> None:
        if options["kind"] not in (None, JudgeKind.REPLAY):
            raise CommandError(f"kind: a bundle makes a replay judge, not {options['kind']}")
        try:
            record, repos = judge_record_import_bundle(
                name=options["name"],
                bundle_path=options["from_bundle"],
                folder=options["base_url"] or None,
                replace=options["replace"],
            )
        except JudgeBundleError as exc:
            # An unreadable bundle exits 2, as verify_run and python -m scoring.bundles do.
            raise CommandError(str(exc), returncode=2) from None
        except JudgeRecordError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Judge record {record.name!r} (replay) saved: the bundle's verdicts for {repos} "
            f"repo(s) in {record.base_url}."
        )
