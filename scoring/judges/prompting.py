"""Delimiting untrusted text inside a judge prompt (pure Python, shared by every benchmark).

A prompt wraps data (a paper, a scanner's findings) in tags such as ``<paper>...</paper>`` and
tells the judge that what is inside is data. Text that writes one of those tags itself, with
or without attributes or spaces (``</paper x>``, ``<answer id=1>``, ``< /paper >``), could
close its block or open another one; :func:`neutralize_tags` escapes such tags so that they
read the same to a person but no longer delimit anything. Other text is returned unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=32)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"</?\s*(?:{names})\b[^>]*>", re.IGNORECASE)


def _escape(match: re.Match[str]) -> str:
    return match.group(0).replace("<", "&lt;").replace(">", "&gt;")


def neutralize_tags(text: str, tags: Iterable[str]) -> str:
    """``text`` with every opening or closing tag named in ``tags`` escaped as ``&lt;..&gt;``."""
    if not text:
        return ""
    return _tag_pattern(tuple(tags)).sub(_escape, text)
