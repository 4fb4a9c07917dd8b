"""System checks run by ``manage.py check``, ``runserver`` and the other management commands."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.checks import CheckMessage, Error
from django.core.files.storage import storages

STATIC_MANIFEST_MISSING = "benchmarks_app.E001"

# Only these commands serve pages. Workers (qcluster) and migrations run on machines that
# need no static files, so they must not require collectstatic.
_PAGE_COMMANDS = frozenset({"runserver", "demo_serve", "check"})


def _serves_pages() -> bool:
    command = sys.argv[1] if len(sys.argv) > 1 and sys.argv[0].endswith("manage.py") else None
    return command is None or command in _PAGE_COMMANDS


def check_static_manifest(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With DEBUG off, pages link static files through collectstatic's manifest.

    Without the manifest every HTML page is a 500 ("Missing staticfiles manifest entry"), so
    refuse to start instead and say how to fix it.
    """
    if settings.DEBUG or not _serves_pages():
        return []
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin) or storage.read_manifest() is not None:
        return []
    return [
        Error(
            f"The static files manifest ({storage.manifest_name} in STATIC_ROOT "
            f"{settings.STATIC_ROOT}) is missing, so every page would fail with a server error.",
            hint="Run `python manage.py collectstatic --noinput` (or set DEBUG=1 for development).",
            id=STATIC_MANIFEST_MISSING,
        )
    ]
