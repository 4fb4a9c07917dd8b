"""PDFs made at test time: real papers' text laid out again the way submissions come.

Nothing here is a shipped paper. ``typeset`` writes a small PDF by hand (Type 1 Helvetica,
no dependency) from lines of text, with review-mode line numbers drawn where ``lineno``
draws them (after the line's text, so pypdf glues them to its end; or before it), a running
header, page numbers, one or two columns, and ``fi``/``fl`` drawn as ligature glyphs.
``number_lines`` adds line numbers to an existing PDF (the bundled papers) by editing its
content streams, which keeps the original fonts and layout.

Run ``python -m tests.scoring.checklist.pdf_fixtures PAPER.pdf...`` to measure extraction on
review-mode variants of any PDFs (e.g. ../shared/data/checklist/papers/).
"""

from __future__ import annotations

import functools
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ContentStream,
    DictionaryObject,
    FloatObject,
    NameObject,
    NumberObject,
    TextStringObject,
)

from scoring.checklist.pdf_text import clean_pages, join_hyphenated

PAGE_BREAK = "\f"
_LIGATURE_CODES = {"ﬁ": b"\x80", "ﬂ": b"\x81"}
_MARKERS = re.compile(
    r"^(?:\d{1,2}\.\s|•|Question:|Answer:|Justification:|Guidelines:|NeurIPS Paper Checklist)"
)


@dataclass(frozen=True)
class Layout:
    """How ``typeset`` lays lines out. ``numbers``: None, ``end`` (drawn after the text, as
    NeurIPS review mode) or ``start``; in two columns the left column's numbers are drawn
    before its lines and the right column's after them, as ICML's template does."""

    columns: int = 1
    lines_per_column: int = 52
    numbers: str | None = "end"
    pad: int = 0
    restart_each_page: bool = False
    header: str = ""
    page_numbers: bool = True


def _pdf_string(text: str) -> bytes:
    out = bytearray()
    for ch in text:
        if ch in _LIGATURE_CODES:
            out += _LIGATURE_CODES[ch]
        else:
            out += ch.encode("cp1252", errors="replace")
    escaped = bytes(out).replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return b"(" + escaped + b")"


def _show(x: float, y: float, text: str, size: float = 9) -> bytes:
    return b"BT /F1 %.1f Tf %.2f %.2f Td %s Tj ET\n" % (size, x, y, _pdf_string(text))


def _write_pdf(streams: list[bytes]) -> bytes:
    """A PDF of one page per content stream, with Helvetica as /F1 (fi and fl at 128, 129)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding "
        b"/BaseEncoding /WinAnsiEncoding /Differences [128 /fi 129 /fl] >> >>",
    ]
    kids = []
    for stream in streams:
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
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
    trailer = b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
    out.write(trailer % (len(objects) + 1, xref))
    return out.getvalue()


def _paginate(lines: list[str], per_page: int) -> list[list[str]]:
    pages: list[list[str]] = [[]]
    for line in lines:
        if line == PAGE_BREAK:
            if pages[-1]:
                pages.append([])
            continue
        if len(pages[-1]) == per_page:
            pages.append([])
        pages[-1].append(line)
    return pages


def typeset(lines: list[str], layout: Layout) -> bytes:
    """Lines (``PAGE_BREAK`` forces a new page) laid out as a PDF in ``layout``."""
    per_page = layout.lines_per_column * layout.columns
    streams = []
    number = 0
    width = 500 / layout.columns
    for page_index, page in enumerate(_paginate(lines, per_page), 1):
        if layout.restart_each_page:
            number = 0
        stream = bytearray()
        if layout.header:
            stream += _show(200, 750, layout.header)
        for i, line in enumerate(page):
            column, row = divmod(i, layout.lines_per_column)
            x, y = 60 + column * (width + 10), 720 - row * 12.5
            number += 1
            label = str(number).zfill(layout.pad)
            text = _show(x, y, line)
            if layout.numbers is None:
                stream += text
                continue
            before = layout.numbers == "start" or (layout.columns == 2 and column == 0)
            margin = _show(x - 28 if column == 0 else x + width + 4, y, label, size=7)
            stream += margin + text if before else text + margin
        if layout.page_numbers:
            stream += _show(300, 40, str(page_index))
        streams.append(bytes(stream))
    return _write_pdf(streams)


# --- text to lay out ---------------------------------------------------------------------


def paper_text(path: Path) -> str:
    """A PDF's text as the extractor sees it, hyphenation at line ends undone."""
    reader = PdfReader(path)
    return join_hyphenated(clean_pages([p.extract_text() or "" for p in reader.pages]).text)


def paragraphs(text: str) -> list[str]:
    """Lines joined into paragraphs; checklist markers and headings start a new one."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if out and not _MARKERS.match(line) and not out[-1].endswith(":"):
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
    return out


def wrap(paragraph: str, width: int, *, hyphenate: bool = True) -> list[str]:
    """Greedy wrapping; a long lowercase word that does not fit is hyphenated ("impor-",
    "tant") as TeX would, so that extraction has to join it again."""
    lines: list[str] = []
    current = ""
    for word in paragraph.split():
        if len(current) + 1 + len(word) <= width or not current:
            current = f"{current} {word}".strip()
            continue
        room = width - len(current) - 2
        if hyphenate and room >= 4 and len(word) >= 9 and word.isalpha() and word.islower():
            cut = min(room, len(word) - 4)
            lines.append(f"{current} {word[:cut]}-")
            current = word[cut:]
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def with_ligatures(text: str) -> str:
    return text.replace("fi", "ﬁ").replace("fl", "ﬂ")


SAMPLE_PAPERS = Path(__file__).resolve().parents[3] / "benchmarks_app/sample_data/checklist/papers"
APPENDIX = (
    "A Additional results on the reviewer task\n"
    + "The appendix reports per-prompt scores of every reviewer baseline, with the variance "
    "over three seeds of the language model and the prompts used for each criterion. " * 3
)


@functools.cache
def _paragraphs(path: Path) -> tuple[str, ...]:
    return tuple(paragraphs(paper_text(path)))


def checklist_lines(
    path: Path, width: int, *, answers: dict[int, str], appendix: bool = False
) -> list[str]:
    """The paper's paragraphs wrapped at ``width`` with ligatures, the answers of the
    questions in ``answers`` respelled, a page break inside question 2's justification, and
    optionally an appendix after the checklist."""
    lines: list[str] = []
    question = 0
    for para in _paragraphs(path):
        if m := re.match(r"(\d{1,2})\. ", para):
            question = int(m.group(1))
        if para.startswith("Answer:") and question in answers:
            para = f"Answer: {answers[question]}"
        wrapped = wrap(with_ligatures(para), width)
        if question == 2 and para.startswith("Justification:"):
            wrapped.insert(1, PAGE_BREAK)
        lines += wrapped
    if appendix:
        lines += [PAGE_BREAK, *(x for p in APPENDIX.split("\n") for x in wrap(p, width))]
    return lines


def drop_questions(lines: list[str], numbers: set[int]) -> list[str]:
    """The lines without the checklist questions in ``numbers`` (heading to guidelines)."""
    out, question = [], 0
    for line in lines:
        if m := re.match(r"(\d{1,2})\. [A-Z]", line):
            question = int(m.group(1))
        if question not in numbers:
            out.append(line)
    return out


# --- line numbers added to a real PDF ------------------------------------------------------


def _multiply(m: list[float], n: list[float]) -> list[float]:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return [
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    ]


def _text_lines(ops: list[tuple[list[object], bytes]]) -> dict[int, tuple[float, list[float]]]:
    """For each text-showing operator: the line's y on the page and the line matrix."""
    ctm, stack = [1.0, 0, 0, 1, 0, 0], []
    tlm = [1.0, 0, 0, 1, 0, 0]
    leading = 0.0
    shows: dict[int, tuple[float, list[float]]] = {}
    for index, (operands, op) in enumerate(ops):
        nums = [float(x) for x in operands if isinstance(x, int | float)]
        if op == b"q":
            stack.append(ctm)
        elif op == b"Q" and stack:
            ctm = stack.pop()
        elif op == b"cm" and len(nums) == 6:
            ctm = _multiply(nums, ctm)
        elif op == b"BT":
            tlm = [1.0, 0, 0, 1, 0, 0]
        elif op == b"Tm" and len(nums) == 6:
            tlm = nums
        elif op in (b"Td", b"TD") and len(nums) == 2:
            tlm = _multiply([1, 0, 0, 1, nums[0], nums[1]], tlm)
            leading = -nums[1] if op == b"TD" else leading
        elif op == b"TL" and nums:
            leading = nums[0]
        elif op in (b"T*", b"'", b'"'):
            tlm = _multiply([1, 0, 0, 1, 0, -leading], tlm)
        if op in (b"Tj", b"TJ", b"'", b'"'):
            y = _multiply(tlm, ctm)[5]
            shows[index] = (y, list(tlm))
    return shows


def number_lines(data: bytes, *, where: str = "end", pad: int = 0) -> bytes:
    """The PDF with a line number in the left margin of every text line of the text block,
    numbered through the paper; ``where="end"`` draws each after its line (pypdf then glues
    it to the line's end, as with NeurIPS review mode), ``"start"`` before it."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    # pypdf has no public way to add an indirect object to a cloned document.
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    number = 0
    for page in writer.pages:
        resources: Any = page["/Resources"].get_object()
        fonts: Any = resources.setdefault(NameObject("/Font"), DictionaryObject()).get_object()
        fonts[NameObject("/FLineNo")] = font
        content = ContentStream(page.get_contents(), writer)
        ops = content.operations
        shows = _text_lines(ops)
        first: dict[int, int] = {}  # rounded y -> index of the line's first show
        last: dict[int, int] = {}  # and of its last one
        for index, (y, _) in shows.items():
            if not 70 <= y <= 725:
                continue
            key = next((k for k in first if abs(k - y) < 7), None)
            if key is None:
                key = round(y)
                first[key] = index
            last[key] = index
        groups = last if where == "end" else first
        last_font: dict[int, list[object]] = {}
        current: list[object] = []
        for index, (operands, op) in enumerate(ops):
            if op == b"Tf":
                current = list(operands)
            last_font[index] = current
        inserts: dict[int, int] = {}
        for key in first:  # in drawing order
            number += 1
            inserts[groups[key]] = number
        new_ops = []
        for index, item in enumerate(ops):
            label = inserts.get(index)
            if label is None:
                new_ops.append(item)
                continue
            tlm = shows[index][1]
            mark = [
                ([NameObject("/FLineNo"), FloatObject(7)], b"Tf"),
                ([*map(NumberObject, (1, 0, 0, 1)), FloatObject(80), FloatObject(tlm[5])], b"Tm"),
                ([TextStringObject(str(label).zfill(pad))], b"Tj"),
                (last_font[index], b"Tf"),
                ([FloatObject(v) for v in tlm], b"Tm"),
            ]
            if where == "end":
                new_ops.extend([item, *mark])
            else:
                new_ops.extend([*mark, item])
        content.operations = new_ops
        page.replace_contents(content)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@functools.cache
def review_pdf(name: str, where: str = "end", pad: int = 0) -> bytes:
    """A bundled paper with line numbers (cached: several tests read the same variant)."""
    return number_lines((SAMPLE_PAPERS / name).read_bytes(), where=where, pad=pad)


def measure(paths: list[Path]) -> list[str]:
    """For each PDF, and each review-mode variant of it: answers and justifications found."""
    from scoring.checklist.extract import extract_paper

    rows = []
    for path in paths:
        data = path.read_bytes()
        base = extract_paper(data, path.name, strict=False)
        variants = {
            "as given": data,
            "numbers at line ends": number_lines(data, where="end"),
            "numbers at line starts, 3 digits": number_lines(data, where="start", pad=3),
        }
        for name, variant in variants.items():
            paper = extract_paper(variant, path.name, strict=False)
            answers = sum(1 for a in paper.answers if a.status == "found")
            same = sum(
                1
                for a, b in zip(paper.answers, base.answers, strict=True)
                if a.status == "found" and a.answer == b.answer
                and a.justification == b.justification and a.justification
            )  # fmt: skip
            rows.append(
                f"{path.name} ({name}): {answers}/15 answers, {same}/15 answers and "
                f"justifications identical to the original's; notes: {'; '.join(paper.notes)}"
            )
    return rows


if __name__ == "__main__":
    for row in measure([Path(p) for p in sys.argv[1:]]):
        print(row)
