"""How long a participant's free-text fields may be, checked before any record is built.

Pure Python (no Django); the site passes its settings (``UPLOAD_MAX_*_CHARS``) in a
:class:`TextLimits`, and the defaults here are the settings' defaults. The limits are far
beyond any real finding or model answer (a bundled description is at most ~22,000 characters)
and exist so that one 15 MB title is refused in milliseconds, not stored and judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Keys whose value is a finding's or response's title / a reference (ids, paths, labels); every
# other string is free text and gets the ``text`` limit.
TITLE_KEYS = frozenset({"title", "Issue", "issue", "name"})
REF_KEYS = frozenset(
    {
        "id",
        "ID",
        "finding_id",
        "probe_id",
        "location",
        "file",
        "files",
        "line",
        "lines",
        "code_ref",
        "code_refs",
        "severity",
        "Severity",
        "vulnerability_type",
        "category",
        "Category",
        "type",
        "project",
        "project_id",
        "human_label",
        "final_label",
        "label",
    }
)


@dataclass(frozen=True)
class TextLimits:
    """The most characters one field may hold: a title, a reference (id, location, file,
    type, label), and any other free text (description, response output, extra fields)."""

    title: int = 1_000
    ref: int = 2_000
    text: int = 50_000

    def for_key(self, key: str) -> int:
        """The limit of a string stored under ``key``."""
        if key in TITLE_KEYS:
            return self.title
        if key in REF_KEYS:
            return self.ref
        return self.text


DEFAULT_LIMITS = TextLimits()


def too_long(what: str, length: int, limit: int) -> str:
    """``"title: 15,000,000 characters, more than the 1,000 allowed"``."""
    return f"{what}: {length:,} characters, more than the {limit:,} allowed"


def overlong_fields(value: Any, where: str, limits: TextLimits) -> Iterator[str]:
    """Every string (and key) under ``value`` longer than its limit, as ``where.key: ...``.

    The limit of a string is its nearest enclosing key's (a list inherits its key's), so a
    ``title`` nested in an ``extra`` object is a title. Iterative, so that deep nesting
    cannot exhaust the stack; lengths only, so that nothing is copied.
    """
    stack: list[tuple[Any, str, str]] = [(value, where, "")]
    while stack:
        item, path, key = stack.pop()
        if isinstance(item, str):
            limit = limits.for_key(key)
            if len(item) > limit:
                yield too_long(path, len(item), limit)
        elif isinstance(item, dict):
            for child_key, child in item.items():
                name = str(child_key)
                if len(name) > limits.ref:
                    yield too_long(f"{path} (a key)", len(name), limits.ref)
                else:
                    stack.append((child, f"{path}.{name}", name))
        elif isinstance(item, list):
            stack.extend((child, f"{path}.{i}", key) for i, child in enumerate(item))
