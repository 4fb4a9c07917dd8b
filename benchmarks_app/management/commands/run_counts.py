from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks_app.services.run_counts import run_counts_reconcile


class Command(BaseCommand):
    help = (
        "Compare the stored run counts (the home page's) with a fresh count of the runs and "
        "correct them; --check only reports, and fails if any count is off."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="write nothing; exit with an error if a count is off or a trigger is missing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            found = run_counts_reconcile(fix=False)
            if found.triggers_missing or found.keys_off:
                raise CommandError(f"Run counts: {found}.")
            self.stdout.write("Run counts: every count equals a fresh count of the runs.")
            return
        done = run_counts_reconcile()
        self.stdout.write(f"Run counts reconciled: {done} (now corrected).")
