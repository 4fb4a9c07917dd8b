"""Playwright for Python driving Debian's chromium against pytest-django's live server.

The browser is never downloaded: the tests use /usr/bin/chromium (``apt-get install
chromium``; ``.ci/run`` installs it) and are skipped with a clear reason when it is missing.
Screenshots land in artifacts/screenshots/ (kept by CI as test artifacts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(
        reason=f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
    )
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium per test module.

    Playwright's sync API runs an event loop in this thread while it is open; Django's ORM
    refuses to run beside one unless told that this is deliberate. Module scope stops the
    loop before other test files run in this process (async_to_sync refuses a running loop).
    """
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def _load_checklist_questions() -> None:
    """Reload the rows of the data migration that a transactional test's flush deleted."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("benchmarks_app.migrations.0002_load_checklist_questions")
    migration.load_questions(apps, None)


@pytest.fixture
def migrated_data(live_server: Any) -> Iterator[None]:
    """Browser tests run in transactions that end with a flush of every table, which also
    empties the tables filled by data migrations (the 15 checklist questions). Reload them
    before the test (an earlier transactional test may have flushed them) and after it (for
    the tests that run next in this process)."""
    _load_checklist_questions()
    yield
    _load_checklist_questions()


@pytest.fixture
def page(browser: Any, live_server: Any, migrated_data: None) -> Iterator[Any]:
    cache.clear()
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}, locale="en-US"
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    cache.clear()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def screenshot(page: Any, request: Any) -> Callable[[str], Path]:
    """``screenshot("step")`` saves artifacts/screenshots/<test>-<step>.png (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")

    def take(step: str) -> Path:
        path = SCREENSHOTS / f"{test}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def login(page: Any) -> Callable[[Any, str], None]:
    """Log in through the real form."""

    def do(user: Any, password: str) -> None:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", password)
        page.click("form.form button[type=submit]")
        page.wait_for_url(re.compile(r".*/$"))

    return do


@pytest.fixture
def queued_tasks(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """Let enqueued runs wait in django-q2's ORM queue, as with a real cluster.

    Test settings run tasks synchronously (Q_SYNC=1), which would finish a run before its
    page ever shows it queued. Here the task goes to the ORM broker instead; the returned
    function plays the worker: it runs every queued run's task and returns their ids.
    """
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "default")

    def process() -> list[int]:
        from django.db import connections

        from benchmarks_app.models import EvaluationRun, RunStatus
        from benchmarks_app.services.runs import run_pieces_prepare, run_process_here

        try:
            done = []
            for run in EvaluationRun.objects.filter(status=RunStatus.QUEUED).order_by("id"):
                run_pieces_prepare(run=run)
                run_process_here(run=run, raise_errors=True)
                done.append(run.pk)
            return done
        finally:
            connections.close_all()

    def work() -> list[int]:
        # In a thread of its own, like a worker: this one runs Playwright's event loop,
        # beside which tasks that bridge to async code (async_to_sync) refuse to run.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(process).result(timeout=120)

    return work
