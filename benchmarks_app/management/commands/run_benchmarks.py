from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

import benchmarks_app.bench as bench_package

# Modules of the bench package that are tools for the benchmarks, not benchmarks.
HELPER_MODULES = {"cluster", "hostile_files"}
# Benchmarks run only when named: the deadline rush starts a whole production set-up and loads
# it for minutes (make bench BENCH=rush), far longer than every other bench together.
ON_REQUEST = {"rush"}


def available() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(bench_package.__path__)
        if m.name not in HELPER_MODULES and not m.name.startswith("_")
    )


def selected(names: list[str]) -> list[str]:
    """The benchmarks a run of ``names`` runs: those named, else all but ``ON_REQUEST``."""
    return names or [n for n in available() if n not in ON_REQUEST]


def _bytecode() -> str:
    """Whether the project's and Django's modules were loaded from compiled bytecode."""
    import django

    def compiled(module_file: str | None) -> bool:
        if not module_file:
            return False
        return Path(importlib.util.cache_from_source(module_file)).exists()

    ours = [Path(__file__).resolve().parents[2] / "models" / "__init__.py"]
    theirs = [Path(django.__file__)]
    state = "compiled" if all(compiled(str(p)) for p in ours + theirs) else "NOT compiled"
    writes = "off" if sys.dont_write_bytecode else "on"
    return f"bytecode {state} (.pyc present; writing {writes})"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def conditions() -> str:
    """The conditions every figure below was measured under (issue 25, item 7)."""
    from django.conf import settings
    from django.db import connection

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return (
        f"conditions: {platform.node()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, database {connection.vendor}, "
        f"DEBUG={settings.DEBUG}, {_bytecode()}, {_load()}, commit {commit or 'unknown'}; "
        "each bench states its path (in-process test client, subprocess, queue workers) and "
        "its workers or concurrency"
    )


class Command(BaseCommand):
    help = "Run the speed benchmarks in benchmarks_app/bench (all, or those named)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "names",
            nargs="*",
            help=f"benchmarks to run (default: all of {available()} but {sorted(ON_REQUEST)})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names = selected(options["names"])
        unknown = sorted(set(names) - set(available()))
        if unknown:
            raise CommandError(f"Unknown benchmark(s) {unknown}; available: {available()}")
        self.stdout.write(conditions())
        for name in names:
            module = importlib.import_module(f"benchmarks_app.bench.{name}")
            self.stdout.write(self.style.MIGRATE_HEADING(f"\n== bench: {name} =="))
            self.stdout.write(f"(start: {_load()})")
            started = time.perf_counter()
            module.run(self.stdout)
            self.stdout.write(
                f"({name} took {time.perf_counter() - started:.1f}s in all; end: {_load()})"
            )
