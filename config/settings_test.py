"""Test settings: the production file with a fixed key, synchronous queue and fast hashing."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ["Q_SYNC"] = "1"
# The server probe adds one call per LLM run; tests that count judge calls would count it too.
# Tests of the probe (and the real-server suite) switch it on.
os.environ.setdefault("JUDGE_PROBE", "0")
# Lease renewals write from a thread of their own; in-process tests end long before one is due
# (tests of leases renew by hand).
os.environ.setdefault("RUN_LEASE_S", "600")
# Likewise the keeper's look for a cancel (the cancel tests set it short).
os.environ.setdefault("RUN_CANCEL_POLL_S", "600")
# A board's judge agreement follows each change of its rows at once (the tests of the refresh
# interval set it).
os.environ.setdefault("JUDGE_AGREEMENT_REFRESH_S", "0")
os.environ.setdefault("MEDIA_ROOT", tempfile.mkdtemp(prefix="evalplatform-media-"))

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
OPENAI_API_KEY = ""
JUDGE_DEFAULT = "offline"
# Tests log in with ``Client.login`` (no request, which django-axes needs); the lockout tests
# switch it on with ``override_settings(AXES_ENABLED=True)``.
AXES_ENABLED = False
# E-mail goes to ``django.core.mail.outbox``; webhooks may point at a local receiver.
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
SITE_URL = "http://testserver"
WEBHOOK_ALLOW_PRIVATE = True
# The default cache stays in each test process's memory: the tests of one process run one at a
# time and clear it around each (tests/conftest.py), while a shared Redis or database cache
# would mix the counts of xdist's parallel workers and add queries to counted requests. The
# tests of the shared caches start processes that share one (TEST_SHARED_CACHE=1 keeps the
# production cache: Redis with REDIS_URL, else the database's table).
if os.environ.get("TEST_SHARED_CACHE") != "1":
    CACHES = {
        **CACHES,  # noqa: F405
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
