"""gunicorn's settings for this site: ``gunicorn -c config/gunicorn.conf.py config.wsgi``.

Sized from the CPUs this process may run on (a container's or cgroup's CPU set, not the host's
count), every figure overridable from the environment:

- ``WEB_CONCURRENCY``: worker processes, default ``2 x CPUs + 1`` (gunicorn's rule: one
  process computes while another waits on the database or a client).
- ``GUNICORN_THREADS``: threads per worker (``gthread``), default 4. A slow client or a paper
  being read in its child process holds one thread, not a whole worker, so one participant's
  uploads cannot take every worker (issue 35: with gunicorn's default of one sync worker, one
  account's uploads made every other visitor wait 13 s).
- ``GUNICORN_MAX_REQUESTS`` (default 1000) and ``GUNICORN_MAX_REQUESTS_JITTER`` (default 100):
  a worker is replaced after that many requests (plus up to the jitter, so workers do not all
  restart at once), which caps the slow growth of a long-lived process's memory (issue 35:
  117 -> 552 MiB over an afternoon). 0 turns it off.
- ``GUNICORN_TIMEOUT`` (default 60 s): a worker silent for that long is killed and replaced;
  with ``gthread`` the worker's main thread reports for it, so only a hung process trips it,
  never one slow request. Paper reading has a deadline of its own (``PDF_PARSE_TIMEOUT_S``).
- ``GUNICORN_GRACEFUL_TIMEOUT`` (default 30 s): how long a stopping worker may finish its
  requests.
- ``GUNICORN_KEEPALIVE`` (default 75 s): how long an idle keep-alive connection is kept. A
  client that sends its next request on a connection just as the worker closes it gets a
  connection reset (HTTP/1.1's keep-alive race; browsers retry, scripts mostly do not), and on
  a busy worker that window widens: with 5 s, visitors pausing 2-10 s between pages saw a few
  resets a minute (issue 35's rush). 75 s is above the pauses of the people and scripts the
  site serves and above the idle timeout of the usual proxies and load balancers (60 s), so
  the client or the proxy closes first. An idle connection costs a worker a socket in its
  poller, not a thread (up to ``worker_connections``, 1000 a worker).
- ``GUNICORN_BIND`` (default ``0.0.0.0:$PORT``, ``PORT`` default 8000).
- ``GUNICORN_PRELOAD`` (default 1): the application is loaded once in the master and the
  workers are forked from it (see ``post_fork``); a replaced worker then costs a fork, not a
  Django start-up.
- ``GUNICORN_ACCESS_LOG`` (default 1): the access log, on stdout like the error log.
- ``GUNICORN_MALLOC_ARENAS`` (default 2; 0 leaves the C library's own): the glibc malloc
  arenas a worker's threads share. glibc gives threads arenas of their own (up to 8 per CPU),
  each kept at the high-water mark of what its thread once held; most of a warmed worker's
  memory is that, not Python objects (issue 35: serving the readers' mix on 4 threads, one
  process plateaued at 222 MiB with glibc's default and 192 MiB with 2 arenas; its live Python
  objects were 27 MiB). Set in the master before it forks, so every worker has it.

A value that is not a number is refused at start-up with a message naming the variable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# gunicorn executes this file before it puts the project on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config import env as envparse


def available_cpus() -> int:
    """CPUs this process may run on (its affinity set: a container limited to 2 CPUs of a
    64-CPU host gets 2), never less than 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def sizing(env: dict[str, str] | os._Environ[str], cpus: int) -> dict[str, Any]:
    """gunicorn's settings for ``cpus`` CPUs, each overridable by its variable in ``env``."""
    threads = envparse.env_int(env, "GUNICORN_THREADS", 4, minimum=1)
    return {
        "workers": envparse.env_int(env, "WEB_CONCURRENCY", 2 * cpus + 1, minimum=1),
        "threads": threads,
        # gthread serves a worker's threads and keeps idle keep-alive connections without
        # holding a thread; with one thread gunicorn's plain sync worker is the same thing.
        "worker_class": "gthread" if threads > 1 else "sync",
        "max_requests": envparse.env_int(env, "GUNICORN_MAX_REQUESTS", 1000, minimum=0),
        "max_requests_jitter": envparse.env_int(
            env, "GUNICORN_MAX_REQUESTS_JITTER", 100, minimum=0
        ),
        "timeout": envparse.env_int(env, "GUNICORN_TIMEOUT", 60, minimum=1),
        "graceful_timeout": envparse.env_int(env, "GUNICORN_GRACEFUL_TIMEOUT", 30, minimum=1),
        "keepalive": envparse.env_int(env, "GUNICORN_KEEPALIVE", 75, minimum=0),
        "preload_app": envparse.env_bool(env, "GUNICORN_PRELOAD", True),
        "bind": [
            env.get("GUNICORN_BIND") or f"0.0.0.0:{envparse.env_int(env, 'PORT', 8000, minimum=1)}"
        ],
        "accesslog": "-" if envparse.env_bool(env, "GUNICORN_ACCESS_LOG", True) else None,
        "malloc_arenas": envparse.env_int(env, "GUNICORN_MALLOC_ARENAS", 2, minimum=0),
    }


M_ARENA_MAX = -8  # glibc's mallopt parameter


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas for this process and those it forks from now on; False where
    ``arenas`` is 0 or the C library is not glibc (nothing changed)."""
    if arenas <= 0:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


_settings = sizing(os.environ, available_cpus())
workers = _settings["workers"]
threads = _settings["threads"]
worker_class = _settings["worker_class"]
max_requests = _settings["max_requests"]
max_requests_jitter = _settings["max_requests_jitter"]
timeout = _settings["timeout"]
graceful_timeout = _settings["graceful_timeout"]
keepalive = _settings["keepalive"]
preload_app = _settings["preload_app"]
bind = _settings["bind"]
accesslog = _settings["accesslog"]
limit_malloc_arenas(_settings["malloc_arenas"])
# Both logs on stdout/stderr, for the service manager or container runtime to collect.
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# The heartbeat file each worker touches: on tmpfs where there is one, since a disk that stalls
# (a container's overlay) would make gunicorn take a busy worker for a hung one.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
proc_name = "evalplatform"


def post_fork(server: Any, worker: Any) -> None:
    """In each new worker, before it serves: no connection opened by the master while it
    loaded the application may be shared with the other workers (one socket, two processes,
    crossed answers), so close the database's and the caches' (they reopen on first use).

    config/wsgi.py froze what start-up allocated (``gc.freeze``) in the master when the
    application was preloaded; freezing again here adds what the master made since, so a
    worker's first full collection does not walk it, and the pages stay shared with the
    master instead of being copied when the collector touches them.
    """
    import gc

    if not server.cfg.preload_app:
        return  # the worker loads the application itself (config/wsgi.py freezes then)
    from django.core.cache import caches
    from django.db import connections

    connections.close_all()
    for cache in caches.all(initialized_only=True):
        cache.close()
    gc.freeze()
