"""Print the checklist challenge leaderboard."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.formatting import render_checklist_table
from benchmarks_app.selectors.checklist import checklist_leaderboard

FIELDS = ("rank", "team", "submission", "c_g", "c_a", "c_t", "r", "s")


def _row(row: dict[str, Any]) -> dict[str, Any]:
    ci = None if row["ci_low"] is None else [row["ci_low"], row["ci_high"]]
    return {
        **{k: row[k] for k in FIELDS},
        "s_ci": ci,
        "rank_low": row["rank_low"],
        "rank_high": row["rank_high"],
        "tied": row["tied"],
        "paired_rank_low": row["paired_rank_low"],
        "paired_rank_high": row["paired_rank_high"],
        "paired_tied": row["paired_tied"],
    }


def _intervals(rows: list[dict[str, Any]]) -> str:
    """The interval, rank range and tie mark of each entry, below the score table."""
    lines = ["", "95% bootstrap interval of S (questions resampled), rank range, ties:"]
    for row in rows:
        ci = (
            "no interval"
            if row["ci_low"] is None
            else f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
        )
        low, high = row["rank_low"], row["rank_high"]
        span = str(low) if low == high else f"{low}-{high}"
        tied = "  ~ tied with the entry above" if row["tied"] else ""
        paired = ""
        if row["paired_rank_low"] is not None:
            p_low, p_high = row["paired_rank_low"], row["paired_rank_high"]
            paired = f"  paired ranks {p_low if p_low == p_high else f'{p_low}-{p_high}'}"
            paired += " (~ tied)" if row["paired_tied"] else ""
        lines.append(f"{row['rank']:>4}  {row['team']}  S {ci}  ranks {span}{tied}{paired}")
    return "\n".join(lines)


class _Maintainer:
    """Who runs manage.py: a maintainer, who sees a hidden phase's board whole (as staff do)."""

    is_authenticated = True
    is_staff = True
    pk = None


class Command(BaseCommand):
    help = (
        "Print the checklist leaderboard (each team's best entry, ranked by S), with the 95% "
        "bootstrap interval of S, the rank range it implies and ties."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--challenge", help="Challenge slug (default: the newest open challenge)"
        )
        parser.add_argument(
            "--phase",
            help="phase slug (default: the open phase, else the last one; 'none': entries made "
            "before the challenge had phases); a hidden phase's board is printed whole",
        )
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rows = checklist_leaderboard(
                challenge_slug=options.get("challenge"),
                phase=options.get("phase"),
                user=_Maintainer(),
            )
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        if options["format"] == "json":
            payload = {"rows": [_row(row) for row in rows]}
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(render_checklist_table(rows) + (_intervals(rows) if rows else ""))
