"""Decoding the JSON files people upload or import (audit scans, truth, repos): what is wrong
is said in words (empty, not text and what it looks like, where the JSON breaks), never as a
codec's or parser's internals; and where decoded JSON holds a NUL, which PostgreSQL cannot
store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scoring.json_text import json_loads


class ParseError(ValueError):
    """A file that cannot be used; the message names what is wrong."""


def load_json(path: Path) -> Any:
    """Read a JSON file, raising :class:`ParseError` for empty or malformed content."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read: {exc.strerror or exc}") from exc
    return loads(raw)


# Leading bytes of files people send instead of JSON by mistake.
_NOT_JSON_KINDS = (
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a .zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"{\\rtf", "an RTF document"),
)


def _kind_of(raw: bytes) -> str | None:
    head = raw.lstrip()[:8]
    return next((kind for magic, kind in _NOT_JSON_KINDS if head.startswith(magic)), None)


def loads(raw: bytes | str) -> Any:
    """Decode a JSON file; :class:`ParseError` says what is wrong in words (no codec or
    parser internals): empty, not text (and what it looks like), or where the JSON breaks."""
    if not (raw.strip() if isinstance(raw, bytes | str) else raw):
        raise ParseError("empty file")
    if isinstance(raw, bytes) and (kind := _kind_of(raw)):
        raise ParseError(f"not JSON: this is {kind}; upload the scanner's JSON results")
    try:
        return json_loads(raw)
    except UnicodeDecodeError as exc:
        raise ParseError(
            f"not JSON: byte {exc.start + 1} is not UTF-8 text; save the results as UTF-8 JSON"
        ) from None
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise ParseError("not valid JSON (nested too deeply)") from None


def nul_path(value: Any, path: str) -> str | None:
    """Where (``path.key.0``) decoded JSON first holds a NUL, which PostgreSQL cannot store;
    ``None`` if nowhere. Iterative: deep (but decodable) nesting cannot exhaust the stack."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in str(key):
                    return where
                stack.append((child, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}.{i}") for i, child in enumerate(item))
    return None
