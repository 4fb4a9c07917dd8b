"""Real ``qcluster`` processes against a database of their own: chaos and scale-out (issue 16).

``python -m benchmarks_app.bench.cluster --scenario kill --db sqlite --json`` creates a fresh
database (a SQLite file with the ORM broker, or a new PostgreSQL database with Redis under a
``Q_NAME`` of its own), seeds audit data, serves a fake OpenAI-compatible judge, starts
``manage.py qcluster`` processes (each leading its own process group), runs the scenario
(runs created through the services, queue not in sync mode), prints its figures as JSON and
removes what it made. :func:`drive` runs it in a subprocess, for tests and ``make bench``. The
fake judge is :mod:`.fake_judge`'s; the scenarios' data (seed, runs, waits) :mod:`.cluster_data`'s.
Scenarios: ``scale`` (:mod:`benchmarks_app.bench.scale`); ``kill``, ``outage``, ``timeout``,
``identical`` and ``sigterm`` (the chaos tests', ``tests/benchmarks_app/queue/chaos.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks_app.bench.fake_judge import FakeJudge

ROOT = Path(__file__).resolve().parents[2]
# Settings of the site that the harness sets itself; anything inherited would leak in.
_OWN_ENV = re.compile(
    r"^(DJANGO_SETTINGS_MODULE|DATABASE_URL|REDIS_URL|SECRET_KEY|DEBUG|Q_\w+"
    r"|RUN_\w+|JUDGE_\w+|OPENAI_\w+|MEDIA_ROOT|LOG_LEVEL)$"
)


# What every process of a harness runs with (a fast-failing judge client, no server probe).
_SETTINGS = """DJANGO_SETTINGS_MODULE=config.settings DEBUG=0 Q_SYNC=0 Q_WORKERS=2 LOG_LEVEL=WARNING
OPENAI_API_KEY=fake JUDGE_MODELS=fake-model JUDGE_PROBE=0 JUDGE_CONCURRENCY=4 JUDGE_TIMEOUT_S=10
JUDGE_BACKOFF_MAX_S=5"""


def _sqlite_copy(source: Path, target: Path) -> None:
    import sqlite3

    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


def group_pids(pgid: int) -> set[int]:
    """Live (not zombie) processes of a process group (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.add(int(entry.name))
    return found


class Cluster:
    """One ``manage.py qcluster`` process, leader of its own process group."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pgid = self.proc.pid
        self._listed: tuple[float, set[int]] = (0.0, set())

    def pids(self, *, max_age_s: float = 0.0) -> set[int]:
        """Its live processes; ``max_age_s`` accepts a recent listing (scanning /proc costs CPU
        that the fake judge, in the same process, would miss)."""
        if time.monotonic() - self._listed[0] > max_age_s:
            self._listed = (time.monotonic(), group_pids(self.pgid))
        return self._listed[1]

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signum)

    def wait_gone(self, timeout_s: float) -> float | None:
        """Seconds until every process of the group is gone (``None``: still there)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            self.proc.poll()
            if not self.pids():
                return time.monotonic() - start
            time.sleep(0.05)
        return None

    def stop(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait()

    def warnings(self, limit: int = 25) -> list[str]:
        """Its WARNING and ERROR lines, and the last traceback whole."""
        text = self.log.read_text(errors="replace")
        lines = [line for line in text.splitlines() if re.search(r"WARNING|ERROR", line)]
        if "Traceback" in text:
            lines += ("Traceback" + text.rsplit("Traceback", 1)[1]).splitlines()[-30:]
        return [line[:300] for line in lines[-limit:]]


def _migrate(env: dict[str, str]) -> None:
    command = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)


def migrated_sqlite_template(env: dict[str, str], scratch_dir: Path) -> Path:
    """A migrated SQLite file shared by harnesses (and the rush bench) of the same migrations
    and packages (migrating takes many seconds of CPU; parallel scenarios would each pay them).
    ``env`` is the settings to migrate under; ``scratch_dir`` holds the file while it is made.
    Copy it (``sqlite3`` backup or a plain copy), never open it in place."""
    sources = sorted((ROOT / "benchmarks_app" / "migrations").glob("*.py"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in [*sources, ROOT / "uv.lock"]))
    template = Path(tempfile.gettempdir()) / f"evalchaos-{digest.hexdigest()[:16]}.sqlite3"
    with open(f"{template}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            scratch = scratch_dir / "template.sqlite3"
            _migrate({**env, "DATABASE_URL": f"sqlite:///{scratch}"})
            _sqlite_copy(scratch, template.with_suffix(".part"))
            os.replace(template.with_suffix(".part"), template)
    return template


class Harness:
    """A database, a broker, a fake judge and the clusters of one scenario; ``close()`` undoes."""

    def __init__(
        self,
        db: str,
        *,
        lease_s: int = 6,
        grace_s: int = 5,
        latency_s: float = 0.15,
        pg_url: str = "",
        redis_url: str = "",
        **settings: Any,
    ) -> None:
        if db not in ("sqlite", "postgres"):
            raise ValueError(f"db: must be sqlite or postgres, got {db!r}")
        self.db = db
        self.tag = f"evalchaos_{secrets.token_hex(4)}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))
        self.judge = FakeJudge(latency_s)
        self.clusters: list[Cluster] = []
        self.lease_s = lease_s
        self.timings: dict[str, float] = {}
        self.pg_admin = pg_url or "postgres://postgres@127.0.0.1:5432/postgres"
        # Statements for the server once the database has been dropped (a role of its own).
        self.pg_after_drop: list[str] = []
        self.redis_url = redis_url or "redis://127.0.0.1:6379/0"
        if db == "sqlite":
            url = f"sqlite:///{self.dir / 'db.sqlite3'}"
        else:
            url = self.pg_admin.rsplit("/", 1)[0] + f"/{self.tag}"
            self._pg(f'CREATE DATABASE "{self.tag}"')
        self.env: dict[str, str] = {
            **{k: v for k, v in os.environ.items() if not _OWN_ENV.match(k)},
            **dict(item.split("=") for item in _SETTINGS.split()),
            "DATABASE_URL": url,
            "SECRET_KEY": secrets.token_urlsafe(40),
            "Q_NAME": self.tag,
            "RUN_LEASE_S": str(lease_s),
            "RUN_PICKUP_GRACE_S": str(grace_s),
            "OPENAI_BASE_URL": self.judge.base_url,
            "MEDIA_ROOT": str(self.dir / "media"),
            **{k: str(v) for k, v in settings.items()},
        }
        if db == "postgres":
            self.env["REDIS_URL"] = self.redis_url

    def _pg(self, sql: str, *, own_database: bool = False) -> None:
        """One statement as the server's admin: in ``postgres``, or in the harness's database."""
        import psycopg

        url = self.env["DATABASE_URL"] if own_database else self.pg_admin
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)

    def open(self) -> Harness:
        """Migrate (SQLite: copy a template migrated once per schema), then set up Django in
        this process against the harness's database."""
        started = time.monotonic()
        if self.db == "sqlite":
            _sqlite_copy(self._sqlite_template(), self.dir / "db.sqlite3")
        else:
            self._migrate(self.env)
        self.timings["migrate_s"] = round(time.monotonic() - started, 1)
        # The driver inherits its caller's settings (CI's second pass sets REDIS_URL): drop the
        # ones the harness sets itself, or a SQLite scenario's driver would enqueue into Redis
        # while its clusters read the ORM broker, and no piece would ever be picked up.
        for key in [k for k in os.environ if _OWN_ENV.match(k) and k not in self.env]:
            del os.environ[key]
        os.environ.update(self.env)
        import django

        django.setup()
        # The SQLite template was migrated under another SECRET_KEY: sign the queue's canary
        # with this harness's key, or its clusters refuse to start.
        from benchmarks_app.services.queue_canary import queue_canary_write

        queue_canary_write(force=True)
        self.timings["setup_s"] = round(time.monotonic() - started, 1)
        return self

    def _migrate(self, env: dict[str, str]) -> None:
        _migrate(env)

    def _sqlite_template(self) -> Path:
        return migrated_sqlite_template(self.env, self.dir)

    def start(self, count: int = 1, *, wait: bool = True, **env: Any) -> list[Cluster]:
        """Start ``count`` clusters (``env`` overrides, e.g. ``Q_WORKERS``); wait until alive."""
        started = [
            Cluster(
                {**self.env, **{k: str(v) for k, v in env.items()}},
                self.dir / f"cluster-{len(self.clusters) + i}.log",
            )
            for i in range(count)
        ]
        self.clusters += started
        if wait:
            from benchmarks_app.services.runs import live_clusters

            until = time.monotonic() + 90
            while len(live_clusters()) < len([c for c in self.clusters if c.proc.poll() is None]):
                if time.monotonic() > until:
                    break
                time.sleep(0.2)
        return started

    def close(self) -> None:
        for cluster in self.clusters:
            cluster.stop()
        self.judge.close()
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if self.db == "postgres":
            try:
                self._pg(f'DROP DATABASE IF EXISTS "{self.tag}" WITH (FORCE)')
                for sql in self.pg_after_drop:
                    self._pg(sql)
            finally:
                import redis

                client = redis.Redis.from_url(self.redis_url)
                keys = list(client.scan_iter(match=f"django_q:{self.tag}:*"))
                if keys:
                    client.delete(*keys)
        if os.environ.get("CHAOS_KEEP"):  # for a post-mortem: the logs and the SQLite file
            print(f"kept {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# Where each scenario is written (a module with SCENARIOS and DEFAULTS); the chaos scenarios
# are the chaos tests' own.
SCENARIO_MODULES = {
    "scale": "benchmarks_app.bench.scale",
    **dict.fromkeys(
        (
            "kill",
            "outage",
            "timeout",
            "identical",
            "sigterm",
            "redis_blip",
            "wrong_key",
            "connection_budget",
        ),
        "tests.benchmarks_app.queue.chaos",
    ),
}


def drive(scenario: str, db: str = "sqlite", *, timeout_s: float = 900, **options: Any) -> dict:
    """Run one scenario in a driver subprocess and return its JSON (``error`` on failure).

    ``options`` are the driver's command-line options (``outage_s=10``, ``set="A=1"``, or a
    list for a repeated option).
    """
    args = [sys.executable, "-m", "benchmarks_app.bench.cluster"]
    args += ["--scenario", scenario, "--db", db, "--json"]
    for key, value in options.items():
        for one in value if isinstance(value, list) else [value]:
            args += [f"--{key.replace('_', '-')}", str(one)]
    pipe = subprocess.PIPE
    with subprocess.Popen(args, cwd=ROOT, stdout=pipe, stderr=pipe, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # SIGTERM, not SIGKILL: the driver then stops its clusters (in sessions of their
            # own, they would outlive it) and drops its database.
            proc.terminate()
            out, err = proc.communicate(timeout=60)
            err = f"driver stopped after {timeout_s} s\n{err}"
    try:
        return dict(json.loads(out.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        return {"error": f"driver exited {proc.returncode}", "stderr": err[-4000:]}


# Options a scenario may set itself (module DEFAULTS) when the command line does not.
_NUMBERS = [
    ("--lease", int, 6, "RUN_LEASE_S"),
    ("--latency", float, 0.15, "judge latency (s)"),
    ("--runs", int, 3, "audit runs at once"),
    ("--repos", int, 4, "repos per run"),
    ("--truths", int, 6, "truth findings per repo"),
    ("--findings", int, 14, "scan findings per repo"),
    ("--outage-s", float, 30.0, "how long the judge is down"),
    ("--patience-s", float, 240.0, "how long to wait for runs to end"),
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIO_MODULES))
    p.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    p.add_argument(
        "--pg-url",
        default=os.environ.get("CHAOS_PG_URL", ""),
        help="a PostgreSQL URL on a server where databases may be created",
    )
    p.add_argument("--redis-url", default=os.environ.get("CHAOS_REDIS_URL", ""))
    for flag, kind, _, text in _NUMBERS:
        p.add_argument(flag, type=kind, help=text)
    p.add_argument("--down-mode", default="503", choices=["503", "drop"])
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every process (e.g. JUDGE_OUTAGE_PATIENCE_S=120)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    import importlib

    p = _parser()
    a = p.parse_args(argv)
    # Stopped from outside: unwind through ``finally``, which removes clusters and database.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    module = importlib.import_module(SCENARIO_MODULES[a.scenario])
    common = {flag[2:].replace("-", "_"): default for flag, _, default, _ in _NUMBERS}
    defaults = {**common, **module.DEFAULTS.get(a.scenario, {})}
    for name, value in defaults.items():
        if getattr(a, name, None) is None:
            setattr(a, name, value)
    bad = [item for item in a.set if "=" not in item]
    if bad:
        p.error(f"--set: {bad[0]!r} is not NAME=VALUE")
    extra = {**defaults.get("settings", {}), **dict(item.split("=", 1) for item in a.set)}
    h = Harness(
        a.db, lease_s=a.lease, latency_s=a.latency, pg_url=a.pg_url, redis_url=a.redis_url, **extra
    )
    started = time.monotonic()
    try:
        result = {"scenario": a.scenario, **module.SCENARIOS[a.scenario](h.open(), a)}
        result["timings"] = {**h.timings, "total_s": round(time.monotonic() - started, 1)}
    except Exception:
        result = {
            "scenario": a.scenario,
            "error": traceback.format_exc()[-4000:],
            "cluster_warnings": [line for c in h.clusters for line in c.warnings()],
        }
    finally:
        h.close()
    print(json.dumps(result, default=str, indent=None if a.json else 2))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
