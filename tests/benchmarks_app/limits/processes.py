"""Separate Django processes sharing the test's database and the production cache.

On SQLite the test database lives in this process's memory: it is copied to a file (with its
migrations, its cache table and whatever the test wrote) that the workers open. On PostgreSQL
they open the test database itself (only committed rows: use ``transactional_db``). With
REDIS_URL set they share Redis, under a key prefix of their own.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.db import connection

ROOT = Path(__file__).resolve().parents[3]
# Django's set-up takes seconds on a loaded machine; a worker that says nothing for this long
# is stuck.
READY_TIMEOUT_S = 180


def shared_database_url(tmp_path: Path) -> str:
    """A DATABASE_URL that other processes can open and that holds the test database."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        target = tmp_path / "shared.sqlite3"
        copy = sqlite3.connect(target)
        connection.connection.backup(copy)
        copy.close()
        return f"sqlite:///{target}"
    db = connection.settings_dict
    return (
        f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db.get('HOST') or '127.0.0.1'}:"
        f"{db.get('PORT') or 5432}/{db['NAME']}"
    )


class Worker:
    """``python -m tests.benchmarks_app.limits.worker ACTION ARGS`` with the shared set-up."""

    def __init__(self, database_url: str, prefix: str, action: str, *args: str, **env: str) -> None:
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "DATABASE_URL": database_url,
            "TEST_SHARED_CACHE": "1",
            "CACHE_KEY_PREFIX": prefix,
            "PYTHONPATH": str(ROOT),
            "WORKER_SETUP_LOCK": str(_lock_file(database_url)),
            **env,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.benchmarks_app.limits.worker", action, *args],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> None:
        line = self._line()
        assert line == "ready", f"worker said {line!r}"

    def go(self) -> dict[str, Any]:
        self._send("go")
        return dict(json.loads(self._line()))

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self._send("stop")
                self.process.stdin.close()  # type: ignore[union-attr]
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _line(self) -> str:
        assert self.process.stdout is not None
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(READY_TIMEOUT_S):
                self.process.kill()
                raise AssertionError("the worker process said nothing")
        return self.process.stdout.readline().strip()


def _lock_file(database_url: str) -> Path:
    import hashlib
    import tempfile

    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"evalplatform-test-workers-{digest}.lock"


def key_prefix() -> str:
    """A cache key prefix of the test's own: parallel tests may share one Redis."""
    return f"test-{secrets.token_hex(6)}"
