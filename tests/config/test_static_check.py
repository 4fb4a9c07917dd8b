"""Issue 11 item 14: with DEBUG off and no collectstatic, start-up fails and says what to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import Error, run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

MANIFEST_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


def _manifest_errors() -> list[Any]:
    return [m for m in run_checks() if m.id == "benchmarks_app.E001"]


def test_missing_manifest_fails_the_checks_and_names_collectstatic(tmp_path: Path) -> None:
    with override_settings(DEBUG=False, STORAGES=MANIFEST_STORAGES, STATIC_ROOT=tmp_path):
        errors = _manifest_errors()
        assert len(errors) == 1 and isinstance(errors[0], Error)
        assert errors[0].hint and "collectstatic" in errors[0].hint
        with pytest.raises(SystemCheckError, match="collectstatic"):
            call_command("check")


def test_present_manifest_passes(tmp_path: Path) -> None:
    (tmp_path / "staticfiles.json").write_text(
        json.dumps({"version": "1.1", "paths": {}, "hash": ""})
    )
    with override_settings(DEBUG=False, STORAGES=MANIFEST_STORAGES, STATIC_ROOT=tmp_path):
        assert _manifest_errors() == []


def test_debug_and_plain_storage_need_no_manifest(tmp_path: Path) -> None:
    with override_settings(DEBUG=True, STORAGES=MANIFEST_STORAGES, STATIC_ROOT=tmp_path):
        assert _manifest_errors() == []
    plain = {**MANIFEST_STORAGES, "staticfiles": {"BACKEND": _PLAIN}}
    with override_settings(DEBUG=False, STORAGES=plain, STATIC_ROOT=tmp_path):
        assert _manifest_errors() == []


_PLAIN = "django.contrib.staticfiles.storage.StaticFilesStorage"
