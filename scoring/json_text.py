"""Decoding JSON from participants without Python's internals in the error.

``json.loads`` raises a plain ``ValueError`` (not ``JSONDecodeError``) for an integer of
more than ``sys.get_int_max_str_digits()`` digits (4300 by default), and its message tells
the reader to call ``sys.set_int_max_str_digits()``: advice for the site's code, not for the
person who sent the number, and an error that the ``except JSONDecodeError`` of every reader
lets through (a 500, or a failed task). :func:`json_loads` turns it into a
``JSONDecodeError`` that says the number is too large and where it is.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any


class NumberTooLarge(json.JSONDecodeError):
    """An integer with more digits than Python converts."""


def _digit_limit() -> int:
    return int(sys.get_int_max_str_digits()) or 4300


def _is_digit_limit(exc: ValueError) -> bool:
    # UnicodeDecodeError is a ValueError too (bytes that are not UTF-8): not ours.
    return not isinstance(exc, UnicodeDecodeError) and "digits" in str(exc)


def number_too_large(text: str | bytes | bytearray) -> NumberTooLarge:
    """The error for ``text`` holding an integer over the digit limit (located if found)."""
    limit = _digit_limit()
    doc = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
    found = re.search(rf"\d{{{limit + 1},}}", doc)
    return NumberTooLarge(
        f"a number is too large (more than {limit} digits)", doc, found.start() if found else 0
    )


def json_loads(text: str | bytes | bytearray, **kwargs: Any) -> Any:
    """``json.loads``, raising :class:`NumberTooLarge` (a ``JSONDecodeError``) for an
    integer over Python's digit limit."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        if not _is_digit_limit(exc):
            raise
        raise number_too_large(text) from None
