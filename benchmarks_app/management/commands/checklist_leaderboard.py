"""Print the checklist challenge leaderboard."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

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
        self.stdout.write(render_table(rows))


def render_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No scored checklist entries yet."
    width = max(4, *(len(str(r["team"])) for r in rows))
    lines = [
        f"{'rank':>4}  {'team':<{width}}  {'entry':>6}  {'C_G':>5}  {'C_A':>5}  {'C_T':>5}  "
        f"{'R':>5}  {'S':>5}"
    ]
    for r in rows:
        lines.append(
            f"{r['rank']:>4}  {r['team']:<{width}}  {'#' + str(r['submission']):>6}  "
            f"{r['c_g']:5.2f}  {r['c_a']:5.2f}  {r['c_t']:5.2f}  {r['r']:5.2f}  {r['s']:5.2f}"
        )
    return "\n".join(lines)
