"""Extract the NeurIPS checklist (15 answers and justifications) and the paper body.

Sources: PDF (via pypdf), LaTeX (.tex), or a .zip of LaTeX sources with a main .tex whose
``\\input``/``\\include`` files are inlined. The body (the text before the checklist, and any
appendix after it) is what the judge reads; it is capped at ``word_cap`` words and the result
says so.

Every question gets a finding (answer, justification, page, or why it is missing), so one
question lost to a PDF's layout does not hide the other fourteen. ``strict=True`` (what a
submission needs) turns an incomplete checklist into an ExtractionError that names every
missing question; the previews (``extract_checklist``, ``POST /api/checklist/extract/``) pass
``strict=False`` and show the findings as they are.

Module map: :mod:`~scoring.checklist.findings` (results and errors),
:mod:`~scoring.checklist.pdf_text` (a PDF's text layer cleaned of line numbers, headers and
ligatures), :mod:`~scoring.checklist.segment` (questions in plain text),
:mod:`~scoring.checklist.latex` (LaTeX sources).
"""

from __future__ import annotations

import io
import math
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import PurePosixPath

from scoring.checklist.findings import (
    CHECKLIST_HEADING,
    ExtractedAnswer,
    ExtractedPaper,
    ExtractionError,
    cap_words,
)
from scoring.checklist.latex import DEFAULT_WORD_CAP, extract_latex, strip_nul
from scoring.checklist.pdf_limits import PdfLimits, check_pdf
from scoring.checklist.pdf_text import clean_pages, join_hyphenated, title_from_runs
from scoring.checklist.segment import checklist_start, parse_checklist_text, read_checklist_text
from scoring.sandbox import LimitExceeded, Limits, run_limited

# A zip is refused beyond this uncompressed size (zip bombs) or member count.
ZIP_MAX_UNCOMPRESSED = 50 * 1024 * 1024
ZIP_MAX_MEMBERS = 2000
# Text after the checklist shorter than this is a page footer, not an appendix.
MIN_APPENDIX_WORDS = 30

__all__ = [
    "CHECKLIST_HEADING",
    "DEFAULT_WORD_CAP",
    "ExtractedAnswer",
    "ExtractedPaper",
    "ExtractionError",
    "Limits",
    "PdfLimits",
    "cap_words",
    "extract_latex",
    "extract_paper",
    "extract_paper_limited",
    "extract_pdf",
    "extract_zip",
    "parse_checklist_text",
    "source_format_for",
]


# Metadata titles that name the file or the tool, not the paper.
_PLACEHOLDER_TITLE = re.compile(
    r"(\.(tex|pdf|docx?|dvi)$|^(untitled|main|paper|title|microsoft word\b))", re.I
)


def _first_page_runs(reader: object) -> list[tuple[str, float]]:
    """The first page's text runs with their rendered font size (font size times scaling)."""
    runs: list[tuple[str, float]] = []

    def visit(text: str, cm: list[float], tm: list[float], font: object, size: float) -> None:
        scale = math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        runs.append((text, round(float(size or 0) * scale, 2)))

    try:
        pages = getattr(reader, "pages", [])
        if len(pages):
            pages[0].extract_text(visitor_text=visit)
    except Exception:  # a title is a nicety: a page pypdf cannot walk leaves it to the text
        return []
    return runs


def _pdf_title(reader: object, body: str) -> str:
    """The metadata title when it is one, else the largest text of the first page (all its
    lines: :func:`~scoring.checklist.pdf_text.title_from_runs`), else the first long line."""
    try:
        meta = getattr(reader, "metadata", None)
        title = " ".join(str((meta.title if meta else None) or "").split())
    except Exception:  # metadata is optional and sometimes malformed
        title = ""
    if len(title) < 8 or _PLACEHOLDER_TITLE.search(title):
        title = title_from_runs(_first_page_runs(reader))
    if not title:
        title = next((ln.strip() for ln in body.splitlines() if len(ln.strip()) > 8), "")
    return strip_nul(title)[:500]


def extract_pdf(
    data: bytes,
    *,
    word_cap: int = DEFAULT_WORD_CAP,
    file: str = "",
    strict: bool = True,
    limits: PdfLimits | None = None,
) -> ExtractedPaper:
    """The checklist and body of a PDF. Pages are cleaned (line numbers, headers, footers,
    ligatures) before the checklist is looked for; each question's page is reported.

    A PDF over ``limits`` (pages, content bytes, operators, nesting) is refused before its
    text is extracted (:func:`~scoring.checklist.pdf_limits.check_pdf`)."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        check_pdf(reader, limits or PdfLimits(), file=file)
        raw_pages = [strip_nul(page.extract_text() or "") for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, ExtractionError):
            raise
        raise ExtractionError(f"not a readable PDF ({exc})", file=file) from exc
    except (AttributeError, IndexError) as exc:  # an object of the wrong type where pypdf
        # expects another: its message would be Python's, not the file's problem
        raise ExtractionError(
            "not a readable PDF (it is damaged or uses a structure the reader does not support)",
            file=file,
        ) from exc
    except RecursionError as exc:
        raise ExtractionError(
            "not a readable PDF (its objects are nested too deeply)", file=file
        ) from exc
    clean = clean_pages(raw_pages)
    text = clean.text
    start = checklist_start(text)
    if start is None:
        raise ExtractionError(
            f"no '{CHECKLIST_HEADING}' section found (is the checklist included?)", file=file
        )
    answers, end = read_checklist_text(text[start:], page_at=lambda o: clean.page_at(start + o))
    notes = list(clean.notes)
    body_text = text[:start]
    after = text[start + end :]
    if len(after.split()) >= MIN_APPENDIX_WORDS:
        body_text = f"{body_text}\n{after}"
        notes.append(f"{len(after.split())} words after the checklist read as part of the body")
    body, words, truncated = cap_words(join_hyphenated(body_text), word_cap)
    paper = ExtractedPaper(
        answers,
        body,
        words,
        truncated,
        "pdf",
        title=_pdf_title(reader, body),
        notes=notes,
        pages=len(raw_pages),
    )
    if strict:
        paper.require_complete(file=file)
    return paper


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, file: str) -> str:
    """One member's text; a damaged, encrypted or oddly compressed member is an
    ExtractionError naming it, not a server error."""
    member = info.filename
    try:
        return archive.read(info).decode("utf-8", errors="replace")
    except NotImplementedError as exc:  # a compression method zipfile does not know
        raise ExtractionError(
            f"{member!r} uses a compression method that cannot be read ({exc}); "
            "zip it again with the usual (deflate) method",
            file=file,
        ) from exc
    except RuntimeError as exc:  # encrypted: zipfile asks for a password
        raise ExtractionError(
            f"{member!r} is encrypted; upload it without a password", file=file
        ) from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise ExtractionError(f"{member!r} is damaged in the archive ({exc})", file=file) from exc


def extract_zip(
    data: bytes, *, word_cap: int = DEFAULT_WORD_CAP, file: str = "", strict: bool = True
) -> ExtractedPaper:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
        raise ExtractionError("not a readable .zip archive", file=file) from exc
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if len(infos) > ZIP_MAX_MEMBERS:
        raise ExtractionError(f"the archive holds more than {ZIP_MAX_MEMBERS} files", file=file)
    if sum(i.file_size for i in infos) > ZIP_MAX_UNCOMPRESSED:
        raise ExtractionError(
            f"the archive unpacks to more than {ZIP_MAX_UNCOMPRESSED // 2**20} MB", file=file
        )
    sources: dict[str, str] = {}
    for info in infos:
        if info.filename.lower().endswith(".tex") and "__MACOSX" not in info.filename:
            sources[info.filename] = _read_member(archive, info, file=file)
    if not sources:
        raise ExtractionError("the archive holds no .tex file", file=file)
    mains = [p for p, t in sources.items() if re.search(r"\\begin\s*\{document\}", t)]
    if not mains:
        raise ExtractionError(
            "no main .tex file (one with \\begin{document}) in the archive", file=file
        )
    # Prefer the shallowest main file, then one named main.tex.
    mains.sort(key=lambda p: (p.count("/"), PurePosixPath(p).name != "main.tex", p))
    paper = extract_latex(
        sources[mains[0]], files=sources, word_cap=word_cap, file=file, source_format="zip"
    )
    if strict:
        paper.require_complete(file=file)
    return paper


def source_format_for(filename: str) -> str:
    suffix = PurePosixPath(filename.lower()).suffix
    formats = {".pdf": "pdf", ".tex": "tex", ".zip": "zip"}
    if suffix not in formats:
        raise ExtractionError(
            f"unsupported file type {suffix or '(none)'!r}: upload a .pdf, .tex or .zip",
            file=filename,
        )
    return formats[suffix]


def extract_paper(
    data: bytes,
    filename: str,
    *,
    word_cap: int = DEFAULT_WORD_CAP,
    strict: bool = True,
    pdf_limits: PdfLimits | None = None,
) -> ExtractedPaper:
    """Dispatch on the file name's extension (the content is checked by each reader).

    ``strict`` raises ExtractionError unless all 15 questions were read (see module doc).
    This runs in the caller's process: untrusted files go through
    :func:`extract_paper_limited`."""
    fmt = source_format_for(filename)
    name = PurePosixPath(filename).name
    if fmt == "pdf":
        if not data.startswith(b"%PDF"):
            raise ExtractionError("is not a PDF file (no %PDF header)", file=name)
        return extract_pdf(data, word_cap=word_cap, file=name, strict=strict, limits=pdf_limits)
    if fmt == "zip":
        return extract_zip(data, word_cap=word_cap, file=name, strict=strict)
    try:
        tex = data.decode("utf-8")
    except UnicodeDecodeError:
        tex = data.decode("latin-1")
    paper = extract_latex(tex, word_cap=word_cap, file=name)
    if strict:
        paper.require_complete(file=name)
    return paper


def _extract_in_child(
    data: bytes, filename: str, word_cap: int, strict: bool, pdf_limits: PdfLimits
) -> ExtractedPaper:
    """:func:`extract_paper` as the sandboxed child runs it: whatever else the readers raise
    becomes an ExtractionError naming the file, in words rather than Python's."""
    name = PurePosixPath(filename).name
    try:
        return extract_paper(
            data, filename, word_cap=word_cap, strict=strict, pdf_limits=pdf_limits
        )
    except ExtractionError:
        raise
    except MemoryError:
        raise
    except RecursionError as exc:
        raise ExtractionError(
            "cannot be read: its structure is nested too deeply", file=name
        ) from exc
    except Exception as exc:
        raise ExtractionError(
            "cannot be read: the file is damaged or uses a structure the reader does not support",
            file=name,
        ) from exc


def extract_paper_limited(
    data: bytes,
    filename: str,
    *,
    word_cap: int = DEFAULT_WORD_CAP,
    strict: bool = True,
    pdf_limits: PdfLimits | None = None,
    limits: Limits | None = None,
    heartbeat: Callable[[], None] | None = None,
) -> ExtractedPaper:
    """:func:`extract_paper` in a child process bounded by ``limits`` (CPU time, a wall
    backstop, memory; :mod:`scoring.sandbox`) after the PDF checks of ``pdf_limits``, so that
    no file holds the caller for longer than the time limit; ``heartbeat`` is called while
    the child reads. Every failure, a limit included, is an ExtractionError naming the file
    and, for a limit, which one."""
    import pypdf  # noqa: F401 - loaded once here, not in every child (a second of compiling)

    name = PurePosixPath(filename).name
    limits = limits or Limits()
    try:
        return run_limited(
            _extract_in_child,
            data,
            filename,
            word_cap,
            strict,
            pdf_limits or PdfLimits(),
            limits=limits,
            heartbeat=heartbeat,
        )
    except LimitExceeded as exc:
        which = {"time": "the time limit", "memory": "the memory limit"}.get(exc.kind)
        message = f"reading it {exc} ({which})" if which else f"the file {exc}"
        raise ExtractionError(f"cannot be read: {message}", file=name) from None
