"""The site of the rush bench (:mod:`.rush`): its options, and the documented production
set-up started for it (database, broker, gunicorn, the queue clusters), undone by ``close()``.

One concern, the served site's life: everything here starts, seeds (through :mod:`._rush_seed`
in a subprocess), asks or stops it; the crowd and the figures live elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
PG_DATABASE = "evalplatform_rush"
Q_NAME = "evalplatform_rush"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise SystemExit(f"{name}={value} must be at least 0")
    return value


@dataclass(frozen=True)
class Options:
    users: int
    seconds: int
    participants: int
    api_clients: int
    hostile: int
    spawn_rate: int
    compare: bool
    sweep: list[int]
    db: str
    redis_db: int
    drain_s: int
    quotas: dict[str, int]
    demo: bool
    json_file: str
    # Fewer requests of a kind than this in either load of a comparison: its ratio is printed,
    # not judged (a p95 of a handful of requests is one request's time).
    compare_min: int = 20
    # "Flat after warm-up": a worker may grow at most this much (MiB of RSS) over the last third
    # of a load (:mod:`._rush_memory`).
    flat_mib: float = 16.0

    @classmethod
    def from_env(cls) -> Options:
        users = _env_int("RUSH_USERS", 100)
        sweep = [int(n) for n in os.environ.get("RUSH_SWEEP", "").replace(" ", "").split(",") if n]
        options = cls(
            users=users,
            seconds=max(1, _env_int("RUSH_SECONDS", 300)),
            participants=_env_int("RUSH_PARTICIPANTS", 20),
            api_clients=_env_int("RUSH_API_CLIENTS", 5),
            hostile=_env_int("RUSH_HOSTILE", 3),
            spawn_rate=max(1, _env_int("RUSH_SPAWN_RATE", 10)),
            # On by default: the 1.5x goal needs the same load without the hostile
            # accounts as its reference.
            compare=os.environ.get("RUSH_COMPARE", "1").strip() not in ("0", "false", "no"),
            sweep=sweep or [users],
            db=os.environ.get("RUSH_DB", "auto").strip() or "auto",
            redis_db=_env_int("RUSH_REDIS_DB", 13),
            drain_s=_env_int("RUSH_DRAIN_S", 120),
            quotas={
                "audit": _env_int("RUSH_QUOTA_AUDIT", 5),
                "probes": _env_int("RUSH_QUOTA_PROBES", 3),
                "checklist": _env_int("RUSH_QUOTA_PAPERS", 3),
            },
            demo=os.environ.get("RUSH_DEMO", "1").strip() not in ("0", "false", "no"),
            json_file=os.environ.get("RUSH_JSON", ""),
            compare_min=_env_int("RUSH_COMPARE_MIN_REQUESTS", 20),
            flat_mib=float(_env_int("RUSH_FLAT_MIB", 16)),
        )
        if options.db not in ("auto", "sqlite", "postgres"):
            raise SystemExit(f"RUSH_DB={options.db!r}: use auto, sqlite or postgres")
        for n in options.sweep:
            fixed = options.participants + options.api_clients + options.hostile
            if n < fixed:
                raise SystemExit(
                    f"RUSH_USERS/RUSH_SWEEP: {n} users cannot hold the {fixed} participants, "
                    "API clients and hostile accounts"
                )
        return options

    def loads(self) -> list[tuple[int, bool]]:
        """(users, hostile accounts on) of each load run, in order: with the comparison, the
        load without the hostile accounts first (its users are the same readers, participants
        and API clients: ``users`` less the hostile accounts, :meth:`crowd`)."""
        runs = []
        for n in self.sweep:
            if self.compare and self.hostile:
                runs.append((n, False))
            runs.append((n, self.hostile > 0))
        return runs

    def crowd(self, users: int, hostile: bool) -> int:
        """Locust users of a load run of ``users``: without the hostile accounts, the same
        crowd less them (the readers are ``users`` less every fixed account either way)."""
        return users if hostile else users - self.hostile


# ---- the site --------------------------------------------------------------------------------


def _postgres_and_redis_answer(redis_db: int) -> bool:
    try:
        import psycopg
        import redis

        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            pass
        redis.Redis.from_url(f"redis://127.0.0.1:6379/{redis_db}", socket_timeout=3).ping()
    except Exception:
        return False
    return True


def _static_root() -> Path:
    """Where the site's static files are collected: a folder kept between runs for the same
    packages and static sources (collecting compresses every file, minutes of CPU on a busy
    machine), made anew when either changes."""
    sources = sorted(p for p in (ROOT / "benchmarks_app" / "static").rglob("*") if p.is_file())
    digest = hashlib.sha256((ROOT / "uv.lock").read_bytes())
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return Path(tempfile.gettempdir()) / f"rush-static-{digest.hexdigest()[:16]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Settings a deployment tunes, passed from the bench's caller to the site's processes, so the
# README's choices can be measured as loaded: gunicorn's and the C allocator's, the caps on
# participants' files read at once, the readers' limits and the queue's workers.
SITE_SETTINGS_PASSED = (
    "GUNICORN_",
    "MALLOC_",
    "PAPER_READER",
    "UPLOAD_READ",
    "PDF_PARSE_",
    "Q_WORKERS",
    "JUDGE_AGREEMENT_",
)


class Site:
    """The served site: database, broker, processes; ``close()`` undoes all of it."""

    def __init__(self, options: Options, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.dir = Path(tempfile.mkdtemp(prefix="rush-"))
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        wanted = options.db
        use_pg = wanted == "postgres" or (
            wanted == "auto" and _postgres_and_redis_answer(options.redis_db)
        )
        if wanted == "postgres" and not _postgres_and_redis_answer(options.redis_db):
            raise SystemExit("RUSH_DB=postgres: PostgreSQL or Redis does not answer on 127.0.0.1")
        self.db = "postgres" if use_pg else "sqlite"
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "VIRTUAL_ENV", "TMPDIR")
        self.env: dict[str, str] = {
            **{k: v for k, v in os.environ.items() if k in keep},
            # A deployment's tuning, as the bench's caller sets it (SITE_SETTINGS_PASSED).
            **{k: v for k, v in os.environ.items() if k.startswith(SITE_SETTINGS_PASSED)},
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "MEDIA_ROOT": str(self.dir / "media"),
            "STATIC_ROOT": str(_static_root()),
            "Q_SYNC": "0",
            "Q_NAME": Q_NAME,
            # RUSH_LOG_LEVEL=INFO shows gunicorn's worker restarts (with RUSH_KEEP_LOGS).
            "LOG_LEVEL": os.environ.get("RUSH_LOG_LEVEL", "WARNING"),
            # The crowd's addresses come as a proxy's X-Forwarded-For (one per visitor).
            "NUM_PROXIES": "1",
            # Plain HTTP on 127.0.0.1: cookies marked Secure would never come back.
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "AUDIT_DAILY_SUBMISSIONS": str(options.quotas["audit"]),
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "GUNICORN_ACCESS_LOG": "0",
            # One machine serves and judges: the judging yields the CPU to the pages, as the
            # README's production section advises for such a machine.
            "Q_NICE": os.environ.get("RUSH_Q_NICE", "10"),
        }
        if self.db == "postgres":
            self.env["DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{PG_DATABASE}"
            self.env["REDIS_URL"] = f"redis://127.0.0.1:6379/{options.redis_db}"
            # The footing "Scaling out" documents: each process's connections bounded by its
            # pool, however many pieces a starved cluster holds. Without it, the clusters at
            # Q_NICE=10 held more pieces at once than before, each with its own connection
            # and its lease keeper's, and PostgreSQL's 100 ran out ("too many clients", 500s
            # on every kind of page for 20 s). RUSH_DATABASE_POOL=0 measures without.
            self.env["DATABASE_POOL"] = os.environ.get("RUSH_DATABASE_POOL", "1")
            self._pg(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
            self._pg(f'CREATE DATABASE "{PG_DATABASE}"')
        else:
            self.env["DATABASE_URL"] = f"sqlite:///{self.dir / 'site.sqlite3'}"

    def _pg(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(sql)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        answer = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            check=False,
        )
        if answer.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{answer.stderr[-3000:]}")
        return answer.stdout

    def prepare(self, loads: int) -> dict[str, Any]:
        """Migrate, collect static files, seed; the fixture the crowd reads."""
        started = time.monotonic()
        if self.db == "sqlite":
            from benchmarks_app.bench.cluster import migrated_sqlite_template

            shutil.copyfile(migrated_sqlite_template(self.env, self.dir), self.dir / "site.sqlite3")
        else:
            self.manage("migrate", "--noinput", "-v", "0")
        steps = [f"migrate {time.monotonic() - started:.0f} s"]
        static = Path(self.env["STATIC_ROOT"])
        with open(f"{static}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (static / "staticfiles.json").exists():
                self.manage("collectstatic", "--noinput", "-v", "0")
        steps.append(f"collectstatic {time.monotonic() - started:.0f} s")
        fixture_path = self.dir / "fixture.json"
        options = self.options
        seed_args = [
            "--seed", str(fixture_path), "--loads", str(loads),
            "--participants", str(options.participants), "--api-clients",
            str(options.api_clients), "--hostile", str(options.hostile),
            "--quota-probes", str(options.quotas["probes"]),
            "--quota-papers", str(options.quotas["checklist"]),
        ]  # fmt: skip
        if not options.demo:
            seed_args.append("--no-demo")
        # The demo's runs are judged in the seeding process itself (Q_SYNC=1).
        subprocess.run(
            [sys.executable, "-m", "benchmarks_app.bench._rush_seed", *seed_args],
            cwd=ROOT,
            env={**self.env, "Q_SYNC": "1"},
            check=True,
            capture_output=True,
        )
        steps.append(f"seed {time.monotonic() - started:.0f} s")
        self.out.write(f"site prepared ({self.db}): {', '.join(steps)} (cumulative)\n")
        return dict(json.loads(fixture_path.read_text()))

    def _start(self, name: str, command: list[str]) -> None:
        log = (self.dir / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, stopped as one
        )
        log.close()

    def start(self) -> None:
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        config = os.environ.get("RUSH_GUNICORN_CONFIG") or "config/gunicorn.conf.py"
        self._start("gunicorn", [gunicorn, "-c", config, "config.wsgi"])
        self._start("qcluster-1", [sys.executable, "manage.py", "qcluster"])
        self._start("qcluster-2", [sys.executable, "manage.py", "qcluster"])
        self._start("webhook_qcluster", [sys.executable, "manage.py", "webhook_qcluster"])
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.log(name)}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.base}/health/", timeout=10) as answer,
            ):
                if answer.status == 200:
                    self._workers_booted(deadline)
                    return
            time.sleep(0.5)
        raise RuntimeError(f"the site did not answer within {START_TIMEOUT_S} s")

    def _workers_booted(self, deadline: float) -> None:
        """Wait until gunicorn's worker count has held for 3 s: the first worker answers
        before the others have booted, and a load should start with all of them."""
        count, steady_since = len(self.serving_pids()), time.monotonic()
        while time.monotonic() - steady_since < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
            now = len(self.serving_pids())
            if now != count:
                count, steady_since = now, time.monotonic()

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def serving_pids(self) -> list[int]:
        """gunicorn's master and its workers (not the short-lived paper readers they fork)."""
        master = self.processes["gunicorn"].pid
        children = Path(f"/proc/{master}/task/{master}/children")
        try:
            workers = [int(p) for p in children.read_text().split()]
        except OSError:
            workers = []
        return [master, *workers]

    def query(self, *args: str) -> Any:
        """A question to the site's database, answered by :mod:`._rush_seed` in a subprocess."""
        answer = subprocess.run(
            [sys.executable, "-m", "benchmarks_app.bench._rush_seed", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(answer.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # A qcluster's workers are its children in its group: none may outlive the bench.
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self.db == "postgres":
            with contextlib.suppress(Exception):
                self._pg(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
            with contextlib.suppress(Exception):
                import redis

                client = redis.Redis.from_url(self.env["REDIS_URL"])
                for key in client.scan_iter(count=1000):  # the bench's own database number
                    client.delete(key)
        if keep := os.environ.get("RUSH_KEEP_LOGS"):
            Path(keep).mkdir(parents=True, exist_ok=True)
            for log in self.dir.glob("*.log"):
                shutil.copy(log, Path(keep) / log.name)
        shutil.rmtree(self.dir, ignore_errors=True)
