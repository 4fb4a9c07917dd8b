"""Plain-text helpers shared by every layer that stores text."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def normalize_line_ends(value: T) -> T:
    r"""``\r\n`` and lone ``\r`` become ``\n``; anything that is not a string is returned as is.

    Browsers send textarea text with ``\r\n``, files come from Windows editors: stored text
    keeps one kind of line end, so that an edit or a re-import that changes nothing but the
    line ends is no change (judge prompts, cache keys and import conflicts depend on it).
    """
    if isinstance(value, str) and "\r" in value:
        return value.replace("\r\n", "\n").replace("\r", "\n")  # type: ignore[return-value]
    return value
