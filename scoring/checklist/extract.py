"""Extract the NeurIPS checklist (15 answers and justifications) and the paper body.

Sources: PDF (via pypdf), LaTeX (.tex), or a .zip of LaTeX sources with a main .tex whose
``\\input``/``\\include`` files are inlined. The body (the text before the checklist) is what
the judge reads; it is capped at ``word_cap`` words and the result says so.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from scoring.checklist.normalize import Answer, AnswerNotRecognized, normalize_answer
from scoring.checklist.questions import QUESTION_NUMBERS, QUESTION_TITLES, label

DEFAULT_WORD_CAP = 15000
# A zip is refused beyond this uncompressed size (zip bombs) or member count.
ZIP_MAX_UNCOMPRESSED = 50 * 1024 * 1024
ZIP_MAX_MEMBERS = 2000
CHECKLIST_HEADING = "NeurIPS Paper Checklist"


class ExtractionError(ValueError):
    """The checklist could not be read; ``question`` names the question when one failed."""

    def __init__(self, message: str, *, question: int | None = None, file: str = "") -> None:
        self.question = question
        self.file = file
        prefix = f"{file}: " if file else ""
        where = f"{label(question)}: " if question else ""
        super().__init__(f"{prefix}{where}{message}")
        self.detail = message


@dataclass(frozen=True)
class ExtractedAnswer:
    number: int
    title: str
    answer: Answer
    raw_answer: str
    justification: str


@dataclass
class ExtractedPaper:
    answers: list[ExtractedAnswer]
    body: str
    body_words: int
    body_truncated: bool
    source_format: str  # pdf | tex | zip
    title: str = ""
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "answers": [
                {
                    "number": a.number,
                    "title": a.title,
                    "answer": a.answer,
                    "justification": a.justification,
                }
                for a in self.answers
            ],
            "body_words": self.body_words,
            "body_truncated": self.body_truncated,
            "title": self.title,
            "source_format": self.source_format,
        }


def cap_words(text: str, cap: int) -> tuple[str, int, bool]:
    """Keep the first ``cap`` words (whitespace kept as is); returns text, words, truncated."""
    words = list(re.finditer(r"\S+", text))
    if len(words) <= cap:
        return text.strip(), len(words), False
    end = words[cap - 1].end()
    return text[:end].strip(), cap, True


# --- checklist segmentation (shared by PDF and LaTeX once both are plain text) --------------

_ANSWER_RE = re.compile(r"Answer\s*:\s*(\[[^\]\n]*\]|[^\n]*)", re.IGNORECASE)
_JUSTIFICATION_RE = re.compile(r"Justification\s*:", re.IGNORECASE)
_GUIDELINES_RE = re.compile(r"Guidelines\s*:", re.IGNORECASE)
# A page number alone on a line, left between a question's lines by PDF text extraction.
_PAGE_NUMBER_LINE = re.compile(r"(?m)^\s*\d{1,3}\s*$\n?")


def _clean_inline(text: str) -> str:
    text = _PAGE_NUMBER_LINE.sub("", text)
    # Words hyphenated at a line end ("Experi-\nments") are joined again.
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)
    return re.sub(r"\s+", " ", text).strip()


def _find_question_starts(region: str) -> dict[int, int]:
    """Offsets of "N. Title" headings, found in order so that numbered guideline lines do not
    match out of sequence."""
    starts: dict[int, int] = {}
    pos = 0
    for number in QUESTION_NUMBERS:
        m = re.compile(rf"(?m)^\s*{number}\.\s+\S").search(region, pos)
        if m is None:
            continue
        starts[number] = m.start()
        pos = m.end()
    return starts


def parse_checklist_text(region: str, *, file: str = "") -> list[ExtractedAnswer]:
    """Parse the checklist region (plain text starting at the checklist heading)."""
    starts = _find_question_starts(region)
    missing = [n for n in QUESTION_NUMBERS if n not in starts]
    if missing:
        found = ", ".join(str(n) for n in sorted(starts)) or "none"
        raise ExtractionError(
            f"not found in the checklist (questions found: {found})",
            question=missing[0],
            file=file,
        )
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    answers: list[ExtractedAnswer] = []
    for i, (number, start) in enumerate(ordered):
        end = ordered[i + 1][1] if i + 1 < len(ordered) else len(region)
        answers.append(_parse_question(number, region[start:end], file=file))
    return answers


def _parse_question(number: int, segment: str, *, file: str) -> ExtractedAnswer:
    answer_match = _ANSWER_RE.search(segment)
    raw = answer_match.group(1).strip() if answer_match else ""
    if raw and not raw.startswith("["):
        # "Answer: Yes Justification: ..." on one line: keep the first word only.
        raw = raw.split("Justification")[0].strip()
    try:
        answer = normalize_answer(raw)
    except AnswerNotRecognized as exc:
        raise ExtractionError(str(exc), question=number, file=file) from exc
    justification = ""
    j = _JUSTIFICATION_RE.search(segment)
    if j:
        rest = segment[j.end() :]
        g = _GUIDELINES_RE.search(rest)
        justification = _clean_inline(rest[: g.start()] if g else rest)
        if re.fullmatch(r"\\?justificationTODO(\{\})?|TODO|\[TODO\]", justification, re.I):
            justification = ""
    return ExtractedAnswer(
        number=number,
        title=QUESTION_TITLES[number],
        answer=answer,
        raw_answer=raw[:100],
        justification=justification,
    )


# --- PDF -----------------------------------------------------------------------------------


def extract_pdf(data: bytes, *, word_cap: int = DEFAULT_WORD_CAP, file: str = "") -> ExtractedPaper:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"not a readable PDF ({exc})", file=file) from exc
    text = "\n".join(pages)
    start = _checklist_start(text)
    if start is None:
        raise ExtractionError(
            f"no '{CHECKLIST_HEADING}' section found (is the checklist included?)", file=file
        )
    answers = parse_checklist_text(text[start:], file=file)
    body, words, truncated = cap_words(text[:start], word_cap)
    title = ""
    try:
        meta_title = reader.metadata.title if reader.metadata else None
        title = str(meta_title or "").strip()
    except Exception:  # metadata is optional and sometimes malformed
        title = ""
    if not title:
        title = next((ln.strip() for ln in body.splitlines() if len(ln.strip()) > 8), "")
    return ExtractedPaper(answers, body, words, truncated, "pdf", title=title[:500])


def _checklist_start(text: str) -> int | None:
    """The heading that the numbered questions follow (a table of contents may name it too)."""
    best = None
    for m in re.finditer(re.escape(CHECKLIST_HEADING), text, re.IGNORECASE):
        if re.search(r"(?m)^\s*1\.\s+\S", text[m.end() : m.end() + 400]):
            best = m.start()
    return best


# --- LaTeX ---------------------------------------------------------------------------------

_ANSWER_MACRO_RE = re.compile(r"\\answer(Yes|No|NA|TODO)\s*(\{\s*\})?")


def _strip_comments(tex: str) -> str:
    return re.sub(r"(?<!\\)%[^\n]*", "", tex)


def _inline_inputs(tex: str, files: dict[str, str], depth: int = 0) -> str:
    if depth > 10 or not files:
        return tex

    def repl(m: re.Match[str]) -> str:
        name = m.group(2).strip()
        for candidate in (name, f"{name}.tex"):
            key = str(PurePosixPath(candidate))
            for path, content in files.items():
                if path == key or path.endswith("/" + key):
                    return _inline_inputs(_strip_comments(content), files, depth + 1)
        return m.group(0)

    return re.sub(r"\\(input|include)\s*\{([^}]*)\}", repl, tex)


def _latex_title(tex: str) -> str:
    m = re.search(r"\\title\s*(?:\[[^\]]*\])?\s*\{", tex)
    if not m:
        return ""
    depth, i = 1, m.end()
    while i < len(tex) and depth:
        depth += {"{": 1, "}": -1}.get(tex[i], 0)
        i += 1
    return _latex_to_text(tex[m.end() : i - 1], {}).strip()


def _section_numbers(tex: str) -> tuple[str, dict[str, str]]:
    """Number \\section/\\subsection as LaTeX would (letters after \\appendix) and resolve
    \\label names, so that "Section 3.2" in a justification can be checked against the body."""
    labels: dict[str, str] = {}
    counters = [0, 0, 0]
    appendix = False
    current = ""
    out: list[str] = []
    pattern = re.compile(
        r"\\appendix\b|\\(section|subsection|subsubsection)(\*?)\s*(?:\[[^\]]*\])?\s*\{([^}]*)\}"
        r"|\\label\s*\{([^}]*)\}"
    )
    pos = 0
    for m in pattern.finditer(tex):
        out.append(tex[pos : m.start()])
        pos = m.end()
        if m.group(0).startswith("\\appendix"):
            appendix = True
            counters = [0, 0, 0]
            continue
        if m.group(4) is not None:
            labels[m.group(4).strip()] = current
            continue
        level = {"section": 0, "subsection": 1, "subsubsection": 2}[m.group(1)]
        title = m.group(3).strip()
        if m.group(2):
            out.append(f"\n\n{title}\n")
            continue
        counters[level] += 1
        for deeper in range(level + 1, 3):
            counters[deeper] = 0
        first = chr(ord("A") + counters[0] - 1) if appendix else str(counters[0])
        current = ".".join([first, *(str(c) for c in counters[1 : level + 1])])
        out.append(f"\n\n{current} {title}\n")
    out.append(tex[pos:])
    return "".join(out), labels


def _latex_to_text(tex: str, labels: dict[str, str]) -> str:
    text = re.sub(
        r"\\(?:eq|auto|c|C)?ref\s*\{([^}]*)\}", lambda m: labels.get(m.group(1), "?"), tex
    )
    text = re.sub(r"\\(?:cite\w*|bibliography\w*|usepackage)\s*(\[[^\]]*\])?\{[^}]*\}", "", text)
    text = re.sub(
        r"\\begin\{(?:figure|table)\*?\}.*?\\end\{(?:figure|table)\*?\}", " ", text, flags=re.S
    )
    text = re.sub(r"\\(begin|end)\s*\{[^}]*\}(\{[^}]*\})?", "\n", text)
    text = re.sub(r"\\item\s*\[\]\s*", "\n", text)
    text = re.sub(r"\\item\b\s*", "\n• ", text)
    text = re.sub(r"\\url\s*\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\href\s*\{([^}]*)\}\s*\{([^}]*)\}", r"\2 (\1)", text)
    # Formatting commands keep their argument; other commands vanish.
    for _ in range(3):
        text = re.sub(r"\\[a-zA-Z]+\*?\s*(?:\[[^\]]*\])?\s*\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\{\\(?:bf|it|em|sc|tt)\s+([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\\\", "\n", text)
    text = re.sub(r"\\[a-zA-Z]+\*?", "", text)
    text = text.replace("~", " ").replace("{", "").replace("}", "")
    text = re.sub(r"\\([%&$#_])", r"\1", text)
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n\s*\n+", "\n\n", text)


def _latex_checklist_region(tex: str) -> int | None:
    m = None
    for candidate in re.finditer(r"NeurIPS\s+Paper\s+Checklist", tex, re.IGNORECASE):
        m = candidate
    if m is None:
        return None
    # Start at the \section*{...} that carries the heading when there is one.
    sec = tex.rfind("\\section", 0, m.start())
    return sec if sec != -1 and m.start() - sec < 40 else m.start()


def _latex_questions(
    region: str, *, file: str, labels: dict[str, str] | None = None
) -> list[ExtractedAnswer]:
    """Questions in the template are ``\\item {\\bf Title}`` followed by ``\\item[]`` lines."""
    heads = list(re.finditer(r"\\item\s*(?:\{\\bf\s+([^}]*)\}|\\textbf\s*\{([^}]*)\})", region))
    if len(heads) < len(QUESTION_NUMBERS):
        # Fall back to numbered plain text ("1. Claims") for hand-written checklists.
        return parse_checklist_text(_latex_to_text(region, {}), file=file)
    answers: list[ExtractedAnswer] = []
    for i, number in enumerate(QUESTION_NUMBERS):
        start = heads[i].end()
        end = heads[i + 1].start() if i + 1 < len(heads) else len(region)
        segment = region[start:end]
        macro = _ANSWER_MACRO_RE.search(segment)
        if macro:
            raw = f"\\answer{macro.group(1)}{{}}"
            answer = normalize_answer(macro.group(1))
        else:
            m = re.search(r"Answer\s*:\s*([^\n\\]*)", segment)
            raw = m.group(1).strip() if m else ""
            try:
                answer = normalize_answer(raw)
            except AnswerNotRecognized as exc:
                raise ExtractionError(str(exc), question=number, file=file) from exc
        justification = ""
        j = re.search(r"Justification\s*:", segment)
        if j:
            rest = segment[j.end() :]
            g = re.search(r"\\item\s*\[\]\s*Guidelines|Guidelines\s*:", rest)
            chunk = rest[: g.start()] if g else rest
            if not re.search(r"\\justificationTODO", chunk):
                justification = _clean_inline(_latex_to_text(chunk, labels or {}))
        answers.append(
            ExtractedAnswer(number, QUESTION_TITLES[number], answer, raw[:100], justification)
        )
    return answers


def extract_latex(
    tex: str,
    *,
    files: dict[str, str] | None = None,
    word_cap: int = DEFAULT_WORD_CAP,
    file: str = "",
    source_format: str = "tex",
) -> ExtractedPaper:
    tex = _inline_inputs(_strip_comments(tex), files or {})
    start = _latex_checklist_region(tex)
    if start is None:
        hint = (
            " (the main file \\input's other files: upload the sources as a .zip)"
            if re.search(r"\\(input|include)\s*\{", tex) and not files
            else ""
        )
        raise ExtractionError(f"no '{CHECKLIST_HEADING}' section found{hint}", file=file)
    body_tex = tex[:start]
    begin = body_tex.find("\\begin{document}")
    title = _latex_title(body_tex)
    if begin != -1:
        body_tex = body_tex[begin + len("\\begin{document}") :]
    numbered, labels = _section_numbers(body_tex)
    answers = _latex_questions(tex[start:], file=file, labels=labels)
    body_text = _latex_to_text(numbered, labels)
    body, words, truncated = cap_words(body_text, word_cap)
    return ExtractedPaper(answers, body, words, truncated, source_format, title=title[:500])


def extract_zip(data: bytes, *, word_cap: int = DEFAULT_WORD_CAP, file: str = "") -> ExtractedPaper:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
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
            sources[info.filename] = archive.read(info).decode("utf-8", errors="replace")
    if not sources:
        raise ExtractionError("the archive holds no .tex file", file=file)
    mains = [p for p, t in sources.items() if re.search(r"\\begin\s*\{document\}", t)]
    if not mains:
        raise ExtractionError(
            "no main .tex file (one with \\begin{document}) in the archive", file=file
        )
    # Prefer the shallowest main file, then one named main.tex.
    mains.sort(key=lambda p: (p.count("/"), PurePosixPath(p).name != "main.tex", p))
    return extract_latex(
        sources[mains[0]], files=sources, word_cap=word_cap, file=file, source_format="zip"
    )


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
    data: bytes, filename: str, *, word_cap: int = DEFAULT_WORD_CAP
) -> ExtractedPaper:
    """Dispatch on the file name's extension (the content is checked by each reader)."""
    fmt = source_format_for(filename)
    name = PurePosixPath(filename).name
    if fmt == "pdf":
        if not data.startswith(b"%PDF"):
            raise ExtractionError("is not a PDF file (no %PDF header)", file=name)
        return extract_pdf(data, word_cap=word_cap, file=name)
    if fmt == "zip":
        return extract_zip(data, word_cap=word_cap, file=name)
    try:
        tex = data.decode("utf-8")
    except UnicodeDecodeError:
        tex = data.decode("latin-1")
    return extract_latex(tex, word_cap=word_cap, file=name)
