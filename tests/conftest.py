from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _media_root(settings: Any, tmp_path: Any) -> Any:
    """Each test writes uploads to its own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    """Throttle counters live in the cache: no test inherits another's request count."""
    cache.clear()
    yield
    cache.clear()


def _wants_db(request: Any) -> str | None:
    names = set(request.fixturenames)
    marker = request.node.get_closest_marker("django_db")
    if {"transactional_db", "live_server"} & names or (
        marker is not None and marker.kwargs.get("transaction")
    ):
        return "transactional_db"
    if "db" in names or marker is not None:
        return "db"
    return None


@pytest.fixture(autouse=True)
def _migration_data(request: Any) -> None:
    """Rows loaded by data migrations are present in every database test.

    A transactional test ends with a flush that deletes them, and xdist's per-file scheduling
    can run ordinary tests after it in the same worker; reloading is idempotent and cheap.
    """
    fixture = _wants_db(request)
    if fixture is None:
        return
    request.getfixturevalue(fixture)
    from django.apps import apps

    from benchmarks_app.models import ChecklistQuestion

    if ChecklistQuestion.objects.count() < 15:
        migration = importlib.import_module(
            "benchmarks_app.migrations.0002_load_checklist_questions"
        )
        migration.load_questions(apps, None)
