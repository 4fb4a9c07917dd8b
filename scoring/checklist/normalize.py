"""Checklist answers normalized to Yes, No, NA or TODO.

The challenge's own scoring compared raw strings, so "N/A" and "NA" counted as different
answers; here every accepted spelling maps to one value before anything is compared.
"""

from __future__ import annotations

import re
from typing import Literal

Answer = Literal["Yes", "No", "NA", "TODO"]
ANSWERS: tuple[Answer, ...] = ("Yes", "No", "NA", "TODO")

_SPELLINGS: dict[str, Answer] = {
    "yes": "Yes",
    "y": "Yes",
    "no": "No",
    "n": "No",
    "na": "NA",
    "n/a": "NA",
    "n.a.": "NA",
    "n.a": "NA",
    "not applicable": "NA",
    "answerna": "NA",
    "answeryes": "Yes",
    "answerno": "No",
    "todo": "TODO",
    "answertodo": "TODO",
    "": "TODO",
}


class AnswerNotRecognized(ValueError):
    pass


def normalize_answer(raw: str | None) -> Answer:
    """Map a raw answer (``[Yes]``, ``yes``, ``N/A``, ``Not Applicable``, ``\\answerNA{}``...).

    ``None`` or an empty answer is TODO; an unknown spelling raises AnswerNotRecognized.
    """
    if raw is None:
        return "TODO"
    text = raw.strip().replace("{}", "")
    # Strip brackets, a LaTeX macro's backslash and braces, trailing punctuation.
    text = re.sub(r"^[\[\(\{\\]+|[\]\)\}\.,;:]+$", "", text.strip()).strip()
    text = text.replace("{}", "").strip().lower()
    text = re.sub(r"\s+", " ", text)
    if text in _SPELLINGS:
        return _SPELLINGS[text]
    # "[Yes] (see Section 3)" and similar: judge by the leading token.
    m = re.match(r"\[?\s*(yes|no|n/a|na|not applicable|todo)\b\s*\]?", text)
    if m and m.group(1) in _SPELLINGS:
        return _SPELLINGS[m.group(1)]
    raise AnswerNotRecognized(f"answer {raw.strip()!r} is not Yes, No, NA or TODO")
