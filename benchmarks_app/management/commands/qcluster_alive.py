"""Liveness probe for ``qcluster``: exit 0 when its sentinel and sweeper live, 1 otherwise."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.services.liveness import DEFAULT_MAX_AGE_S, liveness_problem


class Command(BaseCommand):
    help = "Exit 0 when this machine's qcluster is alive (Q_LIVENESS_FILE is fresh), else 1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-age",
            type=float,
            default=DEFAULT_MAX_AGE_S,
            help=f"seconds since the cluster's last sign of life (default {DEFAULT_MAX_AGE_S:g})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if problem := liveness_problem(max_age_s=options["max_age"]):
            raise CommandError(f"qcluster is not alive: {problem}")
        self.stdout.write("qcluster is alive")
