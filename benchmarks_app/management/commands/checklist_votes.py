"""Both checklist vote policies' votes and agreement, from the assessments on record."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks_app.selectors.checklist import checklist_recorded_votes
from scoring.checklist.votes import PolicyComparison, compare_policies


def comparison_lines(figures: PolicyComparison) -> list[str]:
    """The comparison in words for a terminal (also printed by ``make bench``)."""
    if not figures.answers:
        return [
            "No assessment on record holds two votes or more: assess with CHECKLIST_VOTES=two "
            f"first ({figures.one_vote} one-vote assessment(s) cannot be compared)."
        ]
    share = f"{figures.agreement:.1%}" if figures.agreement is not None else "-"
    saved = figures.votes_two - figures.votes_adaptive
    return [
        f"answers compared: {figures.answers} (recorded with every vote; {figures.one_vote} "
        "one-vote record(s) left out)",
        f"two (always two, a third on disagreement): {figures.votes_two} votes "
        f"({figures.votes_two / figures.answers:.2f} an answer)",
        f"adaptive (a second vote only where the first failed or was unsure): "
        f"{figures.votes_adaptive} votes ({figures.votes_adaptive / figures.answers:.2f} an "
        f"answer, {saved} fewer); {figures.second_votes} answer(s) asked again",
        f"same outcome under both: {figures.agree} of {figures.answers} ({share})",
    ]


class Command(BaseCommand):
    help = (
        "Compare the checklist vote policies (CHECKLIST_VOTES adaptive vs two) on recorded "
        "assessments: votes each asks and how often their outcomes agree. Needs assessments "
        "recorded with CHECKLIST_VOTES=two (every vote kept); asks no judge."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--run", type=int, action="append", default=[], help="a run id (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        figures = compare_policies(checklist_recorded_votes(run_ids=options["run"] or None))
        for line in comparison_lines(figures):
            self.stdout.write(line)
