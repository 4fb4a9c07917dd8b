"""Writes on scanners by their owners: the description shown on the board and report."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from benchmarks_app.models import Scanner
from benchmarks_app.services.audit.runs import AuditRunError

DESCRIPTION_MAX = 2000


@transaction.atomic
def audit_scanner_describe(*, user: Any, scanner: Scanner, description: Any) -> Scanner:
    """Set ``scanner``'s description (its owner, or staff; curated scanners staff only).

    Raises :class:`PermissionError` for anybody else and :class:`AuditRunError`
    (``"description: problem"``) for text that cannot be stored.
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to describe a scanner")
    locked = Scanner.objects.select_for_update(no_key=True).get(pk=scanner.pk)
    if not user.is_staff and (locked.owner_id is None or locked.owner_id != user.pk):
        raise PermissionError(f"scanner: only the owner of {locked.name!r} may describe it")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise AuditRunError("description: expected text")
    text = description.strip()
    if "\x00" in text:
        raise AuditRunError("description: holds a NUL character (\\u0000)")
    if len(text) > DESCRIPTION_MAX:
        raise AuditRunError(f"description: at most {DESCRIPTION_MAX} characters, got {len(text)}")
    if locked.description != text:
        locked.description = text
        locked.save(update_fields=["description", "updated_at"])
    return locked
