from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from benchmarks_app.services.boards import boards_rebuild
from benchmarks_app.services.paired import paired_sweep


class Command(BaseCommand):
    help = (
        "Rewrite every stored leaderboard of the three benchmarks from the appended results "
        "(after an upgrade, or a change of how boards are computed)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        done = boards_rebuild()
        self.stdout.write(
            f"Rebuilt {done.audit} audit board(s), {done.probes} probe board row(s) and "
            f"{done.checklist} checklist board(s)."
        )
        asked = paired_sweep()
        self.stdout.write(f"Paired marks asked for {asked} board(s) (a task each).")
