"""A configuration error is one line on stderr and exit status 2, not a traceback (issue 13)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import ImproperlyConfiguredEnv

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in a fresh environment (no DEBUG, no SECRET_KEY) plus ``env``."""
    fresh = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_missing_secret_key_is_one_line_naming_it_and_the_fix() -> None:
    line = one_error_line(manage("check"))
    assert "SECRET_KEY is required when DEBUG is off" in line and "DEBUG=1" in line


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe'"),
        ({"DEBUG": "1", "Q_TIMEOUT": "ten"}, "Q_TIMEOUT='ten'"),
        ({"DEBUG": "1", "DATABASE_URL": "nosuch://x"}, "DATABASE_URL='nosuch://x'"),
    ],
)
def test_a_malformed_variable_is_one_line_naming_it(env: dict[str, str], names: str) -> None:
    assert names in one_error_line(manage("check", **env))


def test_django_improperly_configured_is_one_line_too() -> None:
    # Raised by Django itself (the database backend's driver is missing), not by config.env.
    line = one_error_line(
        manage(
            "check", "--database", "default", DEBUG="1", DATABASE_URL="mysql://user@127.0.0.1:1/db"
        )
    )
    assert "MySQLdb" in line or "mysqlclient" in line


def test_traceback_flag_keeps_the_traceback() -> None:
    done = manage("check", "--traceback")
    assert done.returncode != 0 and "Traceback" in done.stderr
    assert "ImproperlyConfiguredEnv" in done.stderr


def test_a_working_configuration_is_untouched() -> None:
    done = manage("check", DEBUG="1")
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues" in done.stdout


def _manage_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manage_under_test", ROOT / "manage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_configuration_error_is_found_behind_the_exception_raised_from_it() -> None:
    find = _manage_module()._config_error
    cause = ImproperlyConfiguredEnv("X=1 is wrong")
    try:
        try:
            raise cause
        except ImproperlyConfiguredEnv as exc:
            raise RuntimeError("while loading settings") from exc
    except RuntimeError as wrapped:
        assert find(wrapped) is cause
    django_error = ImproperlyConfigured("bad setting")
    assert find(django_error) is django_error
    assert find(ValueError("not configuration")) is None
