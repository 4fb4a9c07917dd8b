"""config/gunicorn.conf.py: read by gunicorn's own loader, sized from the CPUs this process
may use, every figure overridable from the environment, a bad value refused by name; and a
server started with it runs that many workers and serves."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from gunicorn.app.base import Application
from gunicorn.config import Config

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "config" / "gunicorn.conf.py"
SIZING_VARIABLES = (
    "WEB_CONCURRENCY",
    "GUNICORN_THREADS",
    "GUNICORN_MAX_REQUESTS",
    "GUNICORN_MAX_REQUESTS_JITTER",
    "GUNICORN_TIMEOUT",
    "GUNICORN_PRELOAD",
    "GUNICORN_BIND",
    "GUNICORN_ACCESS_LOG",
    "PORT",
)


class _Loader(Application):
    """gunicorn's application, reading nothing but the file it is given."""

    def __init__(self) -> None:
        self.usage, self.prog, self.callable = None, None, None
        self.cfg = Config()

    def init(self, parser: Any, opts: Any, args: Any) -> None:
        pass

    def load(self) -> Any:
        return None


def _load(monkeypatch: pytest.MonkeyPatch, cpus: int, **env: str) -> Config:
    """The file as gunicorn reads it (its own loader and validators), on ``cpus`` CPUs."""
    for name in SIZING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    loader = _Loader()
    # gunicorn's own reading: each setting through its validator (a wrong type raises).
    loader.load_config_from_file(str(CONF))
    return loader.cfg


@pytest.mark.parametrize(("cpus", "workers"), [(1, 3), (2, 5), (8, 17)])
def test_workers_are_sized_from_the_cpu_set(
    monkeypatch: pytest.MonkeyPatch, cpus: int, workers: int
) -> None:
    config = _load(monkeypatch, cpus)
    assert config.workers == workers
    assert config.threads == 4 and config.worker_class_str == "gthread"
    assert config.max_requests == 1000 and config.max_requests_jitter == 100
    assert config.timeout == 60 and config.graceful_timeout == 30
    # Above the pauses of the site's visitors and the usual proxies' idle timeout (60 s): the
    # client or the proxy closes an idle connection first, not the worker (issue 35's resets).
    assert config.keepalive == 75
    assert config.preload_app is True
    assert config.accesslog == "-" and config.errorlog == "-"
    assert config.bind == ["0.0.0.0:8000"]
    assert callable(config.post_fork)


def test_the_environment_overrides_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _load(
        monkeypatch,
        2,
        WEB_CONCURRENCY="3",
        GUNICORN_THREADS="1",
        GUNICORN_MAX_REQUESTS="0",
        GUNICORN_TIMEOUT="120",
        GUNICORN_KEEPALIVE="5",
        GUNICORN_PRELOAD="0",
        GUNICORN_ACCESS_LOG="0",
        PORT="9000",
    )
    assert config.workers == 3
    # One thread a worker: gunicorn's plain sync worker.
    assert config.threads == 1 and config.worker_class_str == "sync"
    assert config.max_requests == 0 and config.timeout == 120 and config.keepalive == 5
    assert config.preload_app is False and config.accesslog is None
    assert config.bind == ["0.0.0.0:9000"]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("WEB_CONCURRENCY", "many", "WEB_CONCURRENCY='many' is not an integer"),
        ("WEB_CONCURRENCY", "0", "WEB_CONCURRENCY=0 must be at least 1"),
        ("GUNICORN_THREADS", "2.5", "GUNICORN_THREADS='2.5' is not an integer"),
        ("GUNICORN_PRELOAD", "maybe", "GUNICORN_PRELOAD='maybe' is not a boolean"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
    message: str,
) -> None:
    # gunicorn prints why it could not read the file, and exits 1.
    with pytest.raises(SystemExit) as stopped:
        _load(monkeypatch, 2, **{name: value})
    assert stopped.value.code == 1
    assert f"ImproperlyConfiguredEnv: {message}" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_gunicorn_started_with_the_config_runs_its_workers_and_serves(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "WEB_CONCURRENCY": "2",
        "GUNICORN_THREADS": "2",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
    }
    # Migrated as a deployment is: without Redis the limits count in the database cache.
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    server = subprocess.Popen(
        [gunicorn, "-c", "config/gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        status, deadline = 0, time.monotonic() + 90
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/", timeout=10) as r:
                    status = r.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                time.sleep(0.3)
                continue
            break
        assert server.poll() is None, server.communicate(timeout=10)[0].decode()[-3000:]
        assert status == 200
        assert len(_children(server.pid)) == 2
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            output = server.communicate(timeout=30)[0].decode()
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            output = server.communicate()[0].decode()
    # Its log on stdout: gunicorn's start and both workers' boots, and the access line.
    assert "Booting worker" in output and output.count("Booting worker") >= 2
    assert '"GET /api/ HTTP/1.1" 200' in output


def test_malloc_arenas_are_capped_where_the_c_library_is_glibc() -> None:
    import platform
    import runpy

    config = runpy.run_path(str(CONF))  # the config file's own functions
    assert config["sizing"]({}, 2)["malloc_arenas"] == 2
    assert config["sizing"]({"GUNICORN_MALLOC_ARENAS": "0"}, 2)["malloc_arenas"] == 0
    assert config["limit_malloc_arenas"](0) is False
    if platform.libc_ver()[0] == "glibc":
        # glibc's own default for this machine: the cap is accepted, nothing else changes.
        assert config["limit_malloc_arenas"](8 * (os.cpu_count() or 1)) is True
