from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.selectors.audit_boards import (
    BoardNotFound,
    board_document,
    board_rows,
    resolve_board,
)
from scoring.audit.metrics import pct


class Command(BaseCommand):
    help = (
        "Print an audit board: one dataset release and one judge (default: the official "
        "ones). Ranked rows (scanners evaluated on every repo of the release) come first, "
        "with the 95% bootstrap interval of F1 with partial and the rank range it implies; "
        "incomplete rows follow, unranked, with their coverage."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", help="dataset slug (default: the site's first)")
        parser.add_argument("--release", type=int, help="release number (default: official)")
        parser.add_argument(
            "--judge", help="offline, openai:MODEL or replay:DIR (default: the official judge)"
        )
        parser.add_argument(
            "--phase", help="phase slug: the board of that phase's runs (default: whole release)"
        )
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            board = resolve_board(
                dataset=options["dataset"],
                release=options["release"],
                judge=options["judge"],
                phase=options["phase"],
            )
        except BoardNotFound as exc:
            raise CommandError(str(exc)) from None
        document = board_document(board)
        if options["format"] == "json":
            self.stdout.write(json.dumps(document, indent=2))
            return
        if board is None:
            raise CommandError("dataset: no dataset has a published release yet; import_audit")
        self.stdout.write(board.label)
        rows = board_rows(board, everyone=True)
        if not rows:
            self.stdout.write("No scanner evaluated yet.")
        for row in rows:
            ci = row["f1_with_partial_ci"]
            interval = f"[{pct(ci[0])}, {pct(ci[1])}]" if ci else "[—]"
            place = (
                f"{row['rank']:>3} ({row['rank_low']}-{row['rank_high']})"
                if row["complete"]
                else "  - (incomplete)"
            )
            badge = " [baseline]" if row["is_baseline"] else ""
            paired = (
                f", paired ranks {row['paired_rank_low']}-{row['paired_rank_high']}"
                f"{' ≈ tied' if row['paired_tied'] else ''}"
                if row["complete"] and row["paired_rank_low"] is not None
                else ""
            )
            self.stdout.write(
                f"{place} {row['scanner']}{badge}: F1+ {pct(row['f1_with_partial'])} {interval}, "
                f"TP {row['tp']}, partial {row['partial']}, FP {row['fp']}, FN {row['fn']}, "
                f"repos {row['repos_evaluated']}/{row['repos_total']}{paired}"
            )
