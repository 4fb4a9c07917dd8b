"""A web process built from config.wsgi / config.asgi has its views loaded and its start-up
objects frozen out of the cyclic collector's full passes before the first request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, sys
import {module}
print(gc.get_freeze_count(), "benchmarks_app.views.audit" in sys.modules,
      "benchmarks_app.api.checklist_board" in sys.modules, "benchmarks_app.admin" in sys.modules)
"""


def _printed(code: str) -> list[str]:
    """What ``code`` prints, run in a fresh interpreter (start-up is what is looked at)."""
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("module", ["config.wsgi", "config.asgi"])
def test_the_application_module_loads_the_views_and_freezes_start_up(module: str) -> None:
    frozen, views, api, admin = _printed(PROBE.format(module=module))
    assert views == "True" and api == "True" and admin == "True"
    # Django, DRF and the project's modules: well over ten thousand objects.
    assert int(frozen) > 10_000


ADMIN_PROBE = """
import sys
import django
django.setup()
from django.contrib import admin
from benchmarks_app.models import EvaluationRun
before = "benchmarks_app.admin" in sys.modules
from django.core import checks
errors = checks.run_checks(tags=[checks.Tags.admin])
print(before, "benchmarks_app.admin" in sys.modules, admin.site.is_registered(EvaluationRun),
      len(errors))
"""


def test_the_admin_modules_wait_for_the_urlconf_or_the_checks() -> None:
    """A judging command or a queue worker does not import the admin (a tenth of a second of
    every start); the admin's checks still see every ModelAdmin, discovering them first."""
    loaded_at_setup, loaded_for_checks, registered, errors = _printed(ADMIN_PROBE)
    assert loaded_at_setup == "False"
    assert (loaded_for_checks, registered, errors) == ("True", "True", "0")
