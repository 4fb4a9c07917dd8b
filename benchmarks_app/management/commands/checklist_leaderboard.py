"""Print the checklist challenge leaderboard."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks_app.formatting import render_checklist_table
from benchmarks_app.selectors.checklist import checklist_leaderboard

FIELDS = ("rank", "team", "submission", "c_g", "c_a", "c_t", "r", "s")


class Command(BaseCommand):
    help = "Print the checklist leaderboard (each team's best entry, ranked by S)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--challenge", help="Challenge slug (default: the newest open challenge)"
        )
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = checklist_leaderboard(challenge_slug=options.get("challenge"))
        if options["format"] == "json":
            payload = {"rows": [{k: row[k] for k in FIELDS} for row in rows]}
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(render_checklist_table(rows))
