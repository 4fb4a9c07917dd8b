"""When two public names are "the same": one skeleton for scanners, models and teams.

Pure Python (no Django). A name is NFKC-normalised, case-folded, stripped of invisible
characters (zero-width spaces and joiners, controls, private-use code points), its runs of
white space made one space, and each character folded to one representative of its
confusables set (Unicode's confusables table, through ``confusable_homoglyphs``). So
``baseline`` spelt with a Cyrillic a (U+0430), ``BASELINE``, ``baseline`` followed by a
zero-width space and ``baseline`` share a skeleton, while ``baseline-2`` does not. Two names
with equal skeletons are one identity: the later one is refused beside the earlier.
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from pathlib import Path

import confusable_homoglyphs

# Control, format (zero-width, bidi), private-use and surrogate characters, and marks that
# combine with nothing visible (variation selectors are Mn).
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})
_VARIATION_SELECTORS = frozenset(range(0xFE00, 0xFE10)) | frozenset(range(0xE0100, 0xE01F0))


@lru_cache(maxsize=1)
def _confusables() -> dict[str, list[str]]:
    path = Path(confusable_homoglyphs.__file__).with_name("confusables.json")
    table = json.loads(path.read_text(encoding="utf-8"))
    return {
        char: [entry["c"] for entry in entries if len(entry["c"]) == 1]
        for char, entries in table.items()
    }


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """One representative of ``char``'s look-alikes: the smallest ASCII one, if any."""
    candidates = [char, *_confusables().get(char, ())]
    plain = [c for c in candidates if c.isascii()]
    return min(plain) if plain else min(candidates)


def is_invisible(char: str) -> bool:
    return unicodedata.category(char) in INVISIBLE_CATEGORIES or ord(char) in _VARIATION_SELECTORS


def name_skeleton(text: str) -> str:
    """The form under which look-alike names compare equal (see the module's docstring)."""
    text = unicodedata.normalize("NFKC", text or "").casefold()
    text = "".join(ch for ch in text if not is_invisible(ch))
    text = " ".join(text.split())
    # Fold twice through NFKC: a folded character may compose with a following mark.
    folded = "".join(_fold(ch) for ch in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFKC", folded).casefold()


def same_name(a: str, b: str) -> bool:
    return name_skeleton(a) == name_skeleton(b)
