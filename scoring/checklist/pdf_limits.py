"""What a PDF asks of the text extractor, measured before the extractor runs.

pypdf's text extraction costs time and memory in proportion to the content streams it walks
(tens of microseconds per operator), and a PDF can ask for a lot in few bytes: a content stream
of millions of tiny text operators compresses to kilobytes, one stream can be the content of
every page, a page tree can hold thousands of pages, an array nested thousands deep exhausts
the parser's recursion. :func:`check_pdf` walks the page tree and the content streams cheaply
(decompression capped at what is left of the budget, operators and operands counted by
a byte translation in C) and refuses a PDF over a limit with a message naming that limit. A stream
counts once per page that uses it, since extraction walks it once per page.

These checks give an early, clear answer; the child process's time and memory limits
(:mod:`scoring.sandbox`) remain the bound for what they do not foresee.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from scoring.checklist.findings import ExtractionError


@dataclass(frozen=True)
class PdfLimits:
    """``max_content_bytes`` (decompressed) and ``max_operators`` (operators and operands) are
    totals over the pages, a stream shared by pages counting once per page; ``max_nesting``
    bounds arrays nested in a content stream."""

    max_pages: int = 300
    max_content_bytes: int = 20 * 2**20
    max_operators: int = 1_000_000
    max_nesting: int = 32


# Nodes of the page tree visited beyond the pages themselves (intermediate /Pages nodes).
_MAX_TREE_NODES_FACTOR = 2
# Form XObjects drawn inside forms are followed this deep.
_MAX_FORM_DEPTH = 4
# Tokens (operators and operands) are counted as runs of bytes between PDF delimiters: a
# byte translation and a count, both in C, where a tokenizer in Python would cost what pypdf
# costs. Words of a string count as tokens too, as they cost pypdf's text pipeline too.
_DELIMITERS = b" \t\r\n\x00\x0c()<>[]{}/%"
_TOKEN_TABLE = bytes(32 if c in _DELIMITERS else 120 for c in range(256))
_NOT_BRACKET = re.compile(rb"[^\[\]]+")


@dataclass
class _Stream:
    size: int
    tokens: int
    too_deep: bool


def _tokens(code: bytes) -> int:
    marks = code.translate(_TOKEN_TABLE)
    return marks.count(b" x") + marks.startswith(b"x")


def _too_deep(code: bytes, limit: int) -> bool:
    """Whether arrays in ``code`` nest deeper than ``limit``: each pass removes the innermost
    "[]" pairs, so pairs left after ``limit`` passes sit deeper."""
    brackets = _NOT_BRACKET.sub(b"", code)
    for _ in range(limit):
        fewer = brackets.replace(b"[]", b"")
        if fewer == brackets:
            return False
        brackets = fewer
    return b"[]" in brackets


def _filters(stream: Any) -> list[str]:
    value = stream.get("/Filter")
    if value is None:
        return []
    value = value.get_object()
    if isinstance(value, list):
        return [str(v.get_object()) for v in value]
    return [str(value)]


def _decoded(stream: Any, budget: int, *, file: str) -> bytes | None:
    """The stream's decoded bytes, or None when they exceed ``budget``. A plain Flate stream
    is inflated only up to the budget, so a bomb costs what the budget allows."""
    filters = _filters(stream)
    params = stream.get("/DecodeParms")
    raw: bytes = getattr(stream, "_data", b"")  # pypdf keeps the encoded bytes there
    try:
        if not filters:
            data = raw
        elif filters in (["/FlateDecode"], ["/Fl"]) and params is None:
            data = zlib.decompressobj().decompress(raw, budget + 1)
        else:  # other filters: pypdf decodes, within the child's memory limit
            data = stream.get_data()
    except zlib.error:
        data = stream.get_data()  # pypdf recovers damaged streams as far as it can
    except (ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"not a readable PDF (a content stream: {exc})", file=file) from exc
    return None if len(data) > budget else data


def _streams_of(obj: Any) -> Iterator[tuple[object, Any]]:
    """The content streams of a /Contents entry (one stream or an array), with a key that is
    the same for each use of one stream object."""
    if obj is None:
        return
    target = obj.get_object()
    if isinstance(target, list):
        for item in target:
            yield from _streams_of(item)
    elif hasattr(target, "get_data"):
        key = (obj.idnum, obj.generation) if hasattr(obj, "idnum") else id(target)
        yield key, target


def _forms_of(resources: Any, depth: int) -> Iterator[tuple[object, Any]]:
    """Form XObjects a page (or form) may draw, and the forms those draw, ``depth`` deep."""
    if resources is None or depth <= 0:
        return
    xobjects = resources.get_object().get("/XObject")
    if xobjects is None:
        return
    for ref in xobjects.get_object().values():
        form = ref.get_object()
        if not hasattr(form, "get_data") or form.get("/Subtype") != "/Form":
            continue
        yield from _streams_of(ref)
        yield from _forms_of(form.get("/Resources"), depth - 1)


def _pages(reader: Any, limits: PdfLimits, *, file: str) -> list[Any]:
    """The page objects, walked without building pypdf's page list; more than
    ``max_pages`` is refused as soon as the walk (or the tree's own /Count) shows it."""
    too_many = (
        f"has more than {limits.max_pages} pages; the limit is {limits.max_pages} pages "
        "(the page limit)"
    )
    root = reader.trailer["/Root"].get_object()
    tree = root["/Pages"]
    count = tree.get_object().get("/Count", 0)
    if isinstance(count, int) and count > limits.max_pages:
        raise ExtractionError(
            f"has {count} pages; the limit is {limits.max_pages} pages (the page limit)",
            file=file,
        )
    pages: list[Any] = []
    seen: set[object] = set()
    stack = [tree]
    nodes = 0
    while stack:
        ref = stack.pop()
        key = (ref.idnum, ref.generation) if hasattr(ref, "idnum") else id(ref)
        if key in seen:
            continue  # a page tree with a cycle: each node once
        seen.add(key)
        nodes += 1
        node = ref.get_object()
        kids = node.get("/Kids")
        if kids is None:
            pages.append(node)
            if len(pages) > limits.max_pages:
                raise ExtractionError(too_many, file=file)
            continue
        if nodes > _MAX_TREE_NODES_FACTOR * limits.max_pages + 10:
            raise ExtractionError(too_many, file=file)
        stack.extend(reversed(list(kids.get_object())))
    return pages


def check_pdf(reader: Any, limits: PdfLimits, *, file: str = "") -> int:
    """Refuse (ExtractionError naming the limit) a PDF whose pages, content bytes, operators
    or array nesting exceed ``limits``; returns the number of pages."""
    pages = _pages(reader, limits, file=file)
    measured: dict[object, _Stream] = {}
    size = tokens = 0
    for page in pages:
        uses = list(_streams_of(page.get("/Contents")))
        uses += list(_forms_of(page.get("/Resources"), _MAX_FORM_DEPTH))
        for key, stream in uses:
            known = measured.get(key)
            if known is None:
                data = _decoded(stream, limits.max_content_bytes - size, file=file)
                if data is None:
                    break  # over the byte budget: reported below
                known = _Stream(len(data), _tokens(data), _too_deep(data, limits.max_nesting))
                measured[key] = known
            if known.too_deep:
                raise ExtractionError(
                    f"has arrays nested more than {limits.max_nesting} deep in its page "
                    "content (the nesting limit)",
                    file=file,
                )
            size += known.size
            tokens += known.tokens
            if size > limits.max_content_bytes:
                break
            if tokens > limits.max_operators:
                raise ExtractionError(
                    f"has more than {limits.max_operators:,} drawing operators and operands in "
                    f"its pages' content; the limit is {limits.max_operators:,} (the operator "
                    "limit)",
                    file=file,
                )
        else:
            continue
        raise ExtractionError(
            f"has more than {limits.max_content_bytes // 2**20} MB of page content once "
            f"decompressed; the limit is {limits.max_content_bytes // 2**20} MB "
            "(the content size limit)",
            file=file,
        )
    return len(pages)
