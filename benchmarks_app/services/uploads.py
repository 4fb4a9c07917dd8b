"""The one upload-size rule shared by every form and endpoint that takes a file."""

from __future__ import annotations

from django.conf import settings


def upload_max_bytes() -> int:
    return int(settings.UPLOAD_MAX_MB) * 1024 * 1024


def upload_too_large(size: int | None, name: str) -> str | None:
    """The error message for a file over ``UPLOAD_MAX_MB``, or ``None`` when it fits."""
    if (size or 0) <= upload_max_bytes():
        return None
    return (
        f"{name}: file is {(size or 0) / 2**20:.1f} MB, larger than the "
        f"{settings.UPLOAD_MAX_MB} MB limit (UPLOAD_MAX_MB)."
    )
