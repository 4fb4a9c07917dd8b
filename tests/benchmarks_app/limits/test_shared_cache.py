# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 35: the caches every process shares, the login form's rate and the schema built once.

The default cache's choice (Redis with REDIS_URL, else the database) is read from the
environment by config.env.caches; the database cache's counters must keep their window and
not lose counts; the login form counts with the token endpoint; /api/schema/ is generated
once per process."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from benchmarks_app.cache_backends import AtomicDatabaseCache
from config import env as envparse

SHARED = {
    "BACKEND": "benchmarks_app.cache_backends.AtomicDatabaseCache",
    "LOCATION": "test_shared_cache",
}


def test_the_default_cache_is_shared_redis_or_the_database() -> None:
    with_redis = envparse.caches({"REDIS_URL": "redis://cache.internal:6379/2"})
    assert with_redis["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert with_redis["default"]["LOCATION"] == "redis://cache.internal:6379/2"
    without = envparse.caches({})
    assert without["default"]["BACKEND"] == "benchmarks_app.cache_backends.AtomicDatabaseCache"
    assert without["default"]["OPTIONS"]["MAX_ENTRIES"] == 100_000
    assert without["default"]["KEY_PREFIX"] == "evalplatform"
    # Only what may differ between processes stays in one's memory.
    assert without["local"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="CACHE_MAX_ENTRIES"):
        envparse.caches({"CACHE_MAX_ENTRIES": "ten"})


@pytest.fixture
def shared_cache(settings, db) -> AtomicDatabaseCache:
    settings.CACHES = {**settings.CACHES, "shared": SHARED}
    call_command("createcachetable", "test_shared_cache", verbosity=0)
    cache = caches["shared"]
    assert isinstance(cache, AtomicDatabaseCache)
    return cache


def test_database_counts_keep_their_window(shared_cache) -> None:
    """Django's DatabaseCache.incr wrote the count back with the default timeout (300 s): an
    hour's mail window ended five minutes after its last count, and a short one never did."""
    shared_cache.add("count", 0, 2)
    assert [shared_cache.incr("count") for _ in range(3)] == [1, 2, 3]
    assert shared_cache.decr("count") == 2
    assert shared_cache.get("count") == 2
    time.sleep(3.1)  # expiry is stored to the second
    assert shared_cache.get("count") is None
    with pytest.raises(ValueError):
        shared_cache.incr("count")
    with pytest.raises(ValueError):
        shared_cache.incr("never-added")


def test_database_add_takes_an_expired_key_once(shared_cache) -> None:
    assert shared_cache.add("slot", "first", 1)
    assert not shared_cache.add("slot", "second", 30)
    time.sleep(2.1)  # expiry is stored to the second
    assert shared_cache.add("slot", "third", 30)
    assert not shared_cache.add("slot", "fourth", 30)
    assert shared_cache.get("slot") == "third"


@pytest.mark.django_db
def test_the_login_form_is_throttled_with_the_token_endpoint(settings) -> None:
    settings.AXES_ENABLED = False
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "3/min", "user": "5/min"}
    settings.REST_FRAMEWORK = rest
    client = Client()
    wrong = {"username": "nobody", "password": "wrong"}
    codes = [client.post("/accounts/login/", wrong).status_code for _ in range(3)]
    assert codes == [200, 200, 200]  # the form again, with its error
    throttled = client.post("/accounts/login/", wrong)
    assert throttled.status_code == 429
    assert 1 <= int(throttled["Retry-After"]) <= 60
    assert b"Too many login attempts" in throttled.content
    # The same client's API token requests draw on the same count.
    assert APIClient().post("/api/auth/token/", wrong).status_code == 429
    # Reading the form is not an attempt.
    assert client.get("/accounts/login/").status_code == 200


@pytest.mark.django_db
def test_a_login_form_attempt_counts_against_the_token_endpoint(settings) -> None:
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "2/min", "user": "5/min"}
    settings.REST_FRAMEWORK = rest
    wrong = {"username": "nobody", "password": "wrong"}
    Client().post("/accounts/login/", wrong)
    api = APIClient()
    assert api.post("/api/auth/token/", wrong).status_code == 400
    assert api.post("/api/auth/token/", wrong).status_code == 429


@pytest.mark.django_db
def test_the_schema_is_generated_once_per_process() -> None:
    caches["local"].clear()
    client = APIClient()
    with mock.patch.object(
        SchemaGenerator, "get_schema", autospec=True, side_effect=SchemaGenerator.get_schema
    ) as generated:
        bodies = [client.get("/api/schema/?format=json") for _ in range(3)]
        yaml = [client.get("/api/schema/") for _ in range(2)]
    assert generated.call_count == 2  # once per format
    assert all(body.status_code == 200 for body in bodies + yaml)
    assert bodies[0].content == bodies[2].content and b'"openapi"' in bodies[0].content
    assert yaml[0].content == yaml[1].content and yaml[0].content.startswith(b"openapi:")
    assert bodies[0]["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert "filename=" in bodies[2]["Content-Disposition"]
