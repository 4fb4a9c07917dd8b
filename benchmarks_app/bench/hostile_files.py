"""Hostile uploads of issue 23, made on demand: small files that ask a reader for a lot.

Used by ``make bench BENCH=hostile`` (sent to a served site) and by the tests, which check
that each is refused by the limit it aims at. Plain Python, no Django: every PDF is written by
hand (Helvetica, Flate-compressed content streams) so that its shape is exactly the attack's.
"""

from __future__ import annotations

import io
import zlib

# Row 1: tiny text operators ("(a)Tj", six bytes each); 1.5 million of them decode to 9 MB
# (under the content size limit) and compress to about 10 KB.
TINY_OPERATORS = 1_500_000
# Row 2: one stream of 100,000 operators used as the content of 40 pages.
SHARED_STREAM_OPERATORS = 100_000
SHARED_STREAM_PAGES = 40
# Row 3: a content stream that inflates to 70 MB, and a PDF of 5,000 pages.
BOMB_BYTES = 70 * 2**20
MANY_PAGES = 5000
# Row 4: a TJ array nested this deep.
NESTING = 5000
# Row 5: a probe submission CSV of a million rows; row 6: an audit finding's title.
PROBE_ROWS = 1_000_000
TITLE_CHARS = 15_000_000

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _stream(content: bytes, *, compress: bool = True) -> bytes:
    if compress:
        packed = zlib.compress(content, 9)
        head = b"<< /Length %d /Filter /FlateDecode >>" % len(packed)
    else:
        packed, head = content, b"<< /Length %d >>" % len(content)
    return head + b"\nstream\n" + packed + b"\nendstream"


def write_pdf(streams: list[bytes], page_streams: list[int]) -> bytes:
    """A PDF whose objects are the stream objects ``streams`` (already wrapped by
    ``_stream``) and one page per item of ``page_streams``, the index of its content stream
    (pages may share one)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _FONT]
    first_stream = len(objects) + 1
    objects += streams
    kids = []
    for index in page_streams:
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (first_stream + index)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _text_ops(count: int) -> bytes:
    return b"BT /F1 1 Tf 10 10 Td " + b"(a)Tj\n" * count + b"ET"


def tiny_operators_pdf(count: int = TINY_OPERATORS) -> bytes:
    """Row 1: one page of ``count`` one-letter text operators."""
    return write_pdf([_stream(_text_ops(count))], [0])


def shared_stream_pdf(
    operators: int = SHARED_STREAM_OPERATORS, pages: int = SHARED_STREAM_PAGES
) -> bytes:
    """Row 2: ``pages`` pages whose content is one and the same stream."""
    return write_pdf([_stream(_text_ops(operators))], [0] * pages)


def content_bomb_pdf(size: int = BOMB_BYTES) -> bytes:
    """Row 3: a page whose content stream inflates to ``size`` bytes (a comment line after
    a short text: the bytes, not the operators, are the attack)."""
    content = b"BT /F1 12 Tf 72 720 Td (Paper) Tj ET\n%" + b"x" * size
    return write_pdf([_stream(content)], [0])


def many_pages_pdf(pages: int = MANY_PAGES) -> bytes:
    """Row 3: ``pages`` pages, each with its own small stream."""
    streams = [_stream(b"BT /F1 12 Tf 72 720 Td (page %d) Tj ET" % i, compress=False)
               for i in range(pages)]  # fmt: skip
    return write_pdf(streams, list(range(pages)))


def nested_array_pdf(depth: int = NESTING) -> bytes:
    """Row 4: a TJ operand nested ``depth`` arrays deep."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"[" * depth + b"(a)" + b"]" * depth + b" TJ ET"
    return write_pdf([_stream(content)], [0])


def probe_csv(rows: int = PROBE_ROWS) -> bytes:
    """Row 5: an XSTest completions CSV of ``rows`` responses (about 11 bytes a row, 10.8 MB
    for a million), the ids cycling over the suite's 450 prompts."""
    lines = [b"id,completion"] + [b"v2-%d,Yes" % (i % 450 + 1) for i in range(rows)]
    return b"\n".join(lines) + b"\n"


def audit_results(chars: int = TITLE_CHARS) -> dict[str, object]:
    """Row 6: audit results of one finding whose title has ``chars`` characters."""
    return {"findings": [{"title": "A" * chars, "description": "An unchecked call.",
                          "severity": "high"}]}  # fmt: skip


PDF_ROWS = {
    "tiny operators": tiny_operators_pdf,
    "shared stream": shared_stream_pdf,
    "content bomb": content_bomb_pdf,
    "many pages": many_pages_pdf,
    "nested TJ": nested_array_pdf,
}
