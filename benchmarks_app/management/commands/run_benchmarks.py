from __future__ import annotations

import importlib
import pkgutil
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

import benchmarks_app.bench as bench_package

# Modules of the bench package that are tools for the benchmarks, not benchmarks.
HELPER_MODULES = {"cluster", "hostile_files"}


def available() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(bench_package.__path__)
        if m.name not in HELPER_MODULES and not m.name.startswith("_")
    )


class Command(BaseCommand):
    help = "Run the speed benchmarks in benchmarks_app/bench (all, or those named)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "names", nargs="*", help=f"benchmarks to run (default: all of {available()})"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["names"] or available()
        unknown = sorted(set(names) - set(available()))
        if unknown:
            raise CommandError(f"Unknown benchmark(s) {unknown}; available: {available()}")
        for name in names:
            module = importlib.import_module(f"benchmarks_app.bench.{name}")
            self.stdout.write(self.style.MIGRATE_HEADING(f"\n== bench: {name} =="))
            started = time.perf_counter()
            module.run(self.stdout)
            self.stdout.write(f"({name} took {time.perf_counter() - started:.1f}s in all)")
