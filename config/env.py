"""Environment parsing for settings.

Kept apart from ``settings.py`` as plain functions over a mapping so that tests can
check every variable without reloading Django's settings.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dj_database_url

TRUE_VALUES = {"1", "true", "yes", "on"}
FALSE_VALUES = {"0", "false", "no", "off", ""}


class ImproperlyConfiguredEnv(RuntimeError):
    """Raised at start-up when an environment variable is missing or malformed."""


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfiguredEnv(f"{name}={value} must be at least {minimum}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a number") from exc


def env_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return value


def env_list(env: Mapping[str, str], name: str, default: list[str]) -> list[str]:
    raw = env.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_weights(env: Mapping[str, str], name: str) -> dict[str, float]:
    """``low=0.5,high=1.5`` → ``{"low": 0.5, "high": 1.5}`` (empty when unset)."""
    raw = env.get(name, "").strip()
    weights: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        key, sep, value = item.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            weights[key.strip()] = float(value)
        except ValueError as exc:
            raise ImproperlyConfiguredEnv(
                f"{name}: {item!r} is not NAME=NUMBER (e.g. low=0.5,high=1.5)"
            ) from exc
    return weights


def secret_key(env: Mapping[str, str], *, debug: bool, key_file: Path | None = None) -> str:
    """A real key is mandatory outside DEBUG; in DEBUG one is generated once and kept.

    The generated key is stored in ``key_file`` (git-ignored) because every process of the
    site must share it: django-q2 signs queued tasks with it, so a web process and a
    ``qcluster`` worker with different keys would reject each other's tasks.
    """
    key = env.get("SECRET_KEY", "").strip()
    if key:
        return key
    if not debug:
        raise ImproperlyConfiguredEnv(
            "SECRET_KEY is required when DEBUG is off. Set SECRET_KEY to a long random string "
            "(for example: python -c 'import secrets; print(secrets.token_urlsafe(50))'), "
            'or set DEBUG=1 for local development (make manage ARGS="..." sets it for you).'
        )
    if key_file is None:
        return "dev-insecure-" + secrets.token_urlsafe(40)
    stored = _read_key(key_file)
    if stored:
        return stored
    # Written to a temporary file, then linked into place: the key file is either absent or
    # complete, and when two processes start at once the first link wins and both use it.
    generated = "dev-insecure-" + secrets.token_urlsafe(40)
    temporary = key_file.with_name(f"{key_file.name}.{os.getpid()}.{secrets.token_hex(4)}")
    temporary.write_text(generated, encoding="utf-8")
    os.chmod(temporary, 0o600)
    try:
        if key_file.exists() and not _read_key(key_file):
            key_file.unlink()  # an empty file left by an older version or a crash
        os.link(temporary, key_file)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
    return _read_key(key_file) or generated


def _read_key(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def database(env: Mapping[str, str], base_dir: Path) -> dict[str, Any]:
    default_url = f"sqlite:///{base_dir / 'db.sqlite3'}"
    url = env.get("DATABASE_URL", "").strip() or default_url
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
    except Exception as exc:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfiguredEnv(f"DATABASE_URL={url!r} cannot be parsed: {exc}") from exc
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Several writers (runserver + qcluster) share the file: wait for locks instead of
        # failing at once, and use WAL so readers never block the writer.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif "postgresql" in config["ENGINE"] and env_bool(env, "DATABASE_POOL", False):
        config.update(CONN_MAX_AGE=0, OPTIONS={**config.get("OPTIONS", {}), "pool": pool(env)})
    return config


def pool_size_default(env: Mapping[str, str]) -> int:
    """A process's pool size unless ``DATABASE_POOL_SIZE`` says: 4, or fewer where a worker
    never holds that many (one piece: its thread, its lease keeper and the task's thread)."""
    pieces = env_int(env, "RUN_PIECES_PER_PROCESS", 16, minimum=1)
    return min(4, 2 * pieces + 1)


def pool(env: Mapping[str, str]) -> dict[str, Any]:
    """Django's PostgreSQL connection pool (psycopg_pool), one per process: the process never
    holds more than ``max_size`` connections, however many pieces and threads it runs (they
    wait for a free one, up to ``DATABASE_POOL_TIMEOUT_S``). None is kept open while idle
    past a minute, and none opened before it is needed (the cluster's single-threaded
    processes hold one at most)."""
    return {
        "min_size": 0,
        "max_size": env_int(env, "DATABASE_POOL_SIZE", pool_size_default(env), minimum=2),
        "max_idle": 60.0,
        "timeout": float(env_int(env, "DATABASE_POOL_TIMEOUT_S", 30, minimum=1)),
    }


def caches(env: Mapping[str, str]) -> dict[str, Any]:
    """Django's caches: ``default`` is shared by every process of the site (throttles, mail
    caps, paper-reader slots must hold across web workers, queue workers and restarts):
    Redis when REDIS_URL is set, else a table of the database (created by every migrate).

    ``local`` is this process's memory, for what may differ between processes (the OpenAPI
    schema, rebuilt once per process); ``queue_stats`` is where clusters on the ORM broker
    publish that they are alive.
    """
    prefix = env.get("CACHE_KEY_PREFIX", "evalplatform").strip()
    redis_url = env.get("REDIS_URL", "").strip()
    default: dict[str, Any]
    if redis_url:
        default = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}
    else:
        default = {
            # Django's database cache with an increment that is one locked statement (its own
            # reads, adds one and writes back, and resets the expiry: two processes lost counts).
            "BACKEND": "benchmarks_app.cache_backends.AtomicDatabaseCache",
            "LOCATION": "evalplatform_cache",
            # Django culls a third of the table past 300 entries, which would drop live
            # throttle counts and reader leases with it; expired rows are culled first.
            "OPTIONS": {"MAX_ENTRIES": env_int(env, "CACHE_MAX_ENTRIES", 100_000, minimum=1000)},
        }
    default["KEY_PREFIX"] = prefix
    return {
        "default": default,
        "local": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "queue_stats": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "evalplatform_queue_stats",
        },
    }


def webhook_cluster_name(env: Mapping[str, str]) -> str:
    """The django-q2 queue of webhook deliveries: ``<Q_NAME>-webhooks``."""
    return f"{env.get('Q_NAME', 'evalplatform')}-webhooks"


def q_cluster(env: Mapping[str, str]) -> dict[str, Any]:
    """django-q2 settings: Redis broker when REDIS_URL is set, the ORM broker otherwise.

    ``timeout`` must stay below ``retry``, or a slow task is handed to a second worker
    while the first is still running it.
    """
    timeout = env_int(env, "Q_TIMEOUT", 1800, minimum=10)
    retry = env_int(env, "Q_RETRY", timeout + 300, minimum=11)
    if retry <= timeout:
        raise ImproperlyConfiguredEnv(
            f"Q_RETRY ({retry}) must be greater than Q_TIMEOUT ({timeout})"
        )
    cluster: dict[str, Any] = {
        "name": env.get("Q_NAME", "evalplatform"),
        "workers": env_int(env, "Q_WORKERS", 2, minimum=1),
        "timeout": timeout,
        "retry": retry,
        "max_attempts": env_int(env, "Q_MAX_ATTEMPTS", 3, minimum=1),
        # A cluster prefetches at most one task beyond those its workers run, so an idle
        # cluster elsewhere gets the next one; the sweeper resends what a busy cluster holds.
        "queue_limit": 1,
        "bulk": 1,
        "save_limit": 1000,
        "catch_up": False,
        "sync": env_bool(env, "Q_SYNC", False),
        "label": "Task queue",
    }
    # Webhook deliveries have a queue (django-q2 "cluster") of their own, served by a small
    # ``qcluster`` started with Q_CLUSTER_NAME set to it (``manage.py webhook_qcluster``): a
    # slow receiver can then hold a webhook worker at most, never a judge worker. Its tasks
    # are short (one delivery is bounded by WEBHOOK_TIMEOUT_S), hence the short timeout.
    webhook_timeout = max(30, int(env_float(env, "WEBHOOK_TIMEOUT_S", 10.0)) + 30)
    cluster["ALT_CLUSTERS"] = {
        webhook_cluster_name(env): {
            "workers": env_int(env, "WEBHOOK_WORKERS", 2, minimum=1),
            "timeout": webhook_timeout,
            "retry": webhook_timeout + 60,
        }
    }
    redis_url = env.get("REDIS_URL", "").strip()
    if redis_url:
        cluster["redis"] = redis_url
    else:
        cluster["orm"] = "default"
        # How long a queued task may wait for an idle cluster to look (a SELECT each time, on
        # an indexed empty queue: about 10 a second cost an idle cluster well under 1% of a
        # core). At 0.2 s a run's first pieces waited 0.1 s on average for a worker, 1% of the
        # documented 10 s audit; Redis hands a task over at once and needs none.
        cluster["poll"] = max(0.01, env_float(env, "Q_POLL_S", 0.1))
        # Cluster stats (who is alive) must be shared between processes: a database cache
        # (Redis keeps them itself). See CACHES in settings.
        cluster["cache"] = "queue_stats"
    return cluster
