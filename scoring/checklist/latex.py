"""The checklist and body of a LaTeX paper (one .tex, or the files of a .zip inlined).

The template writes each question as ``\\item {\\bf Title}`` followed by ``\\item[]``
lines; titles vary between papers and years, so each question is identified by the opening
words of its "Question:" line, and by its position only where that line was reworded. A
question that is not there is reported missing rather than failing the paper.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from scoring.checklist.findings import (
    CHECKLIST_HEADING,
    ExtractedAnswer,
    ExtractedPaper,
    ExtractionError,
    Status,
    cap_words,
    missing_answer,
)
from scoring.checklist.normalize import AnswerNotRecognized, normalize_answer
from scoring.checklist.questions import QUESTION_NUMBERS, QUESTION_TITLES
from scoring.checklist.segment import QUESTION_OPENINGS, clean_inline, read_checklist_text

DEFAULT_WORD_CAP = 15000
# Inlining stops with an ExtractionError past this many \input/\include expansions or this
# many characters of inlined text (a paper's sources are far below both).
MAX_INPUT_EXPANSIONS = 200
MAX_INLINED_CHARS = 8 * 2**20

_ANSWER_MACRO_RE = re.compile(r"\\answer(Yes|No|NA|TODO)\s*(\{\s*\})?")


def strip_nul(text: str) -> str:
    """``text`` without NUL characters (PostgreSQL cannot store them; they carry no text)."""
    return text.replace("\x00", "")


def _strip_comments(tex: str) -> str:
    return re.sub(r"(?<!\\)%[^\n]*", "", tex)


class _InlineBudget:
    """How much ``\\input``/``\\include`` inlining may still do: a few files that each input
    the next several times grow exponentially (k copies over 10 levels is k**10)."""

    def __init__(self, *, max_inputs: int, max_chars: int, file: str) -> None:
        self.inputs_left = max_inputs
        self.max_inputs = max_inputs
        self.max_chars = max_chars
        self.chars = 0
        self.file = file

    def spend(self, content: str) -> None:
        self.inputs_left -= 1
        self.chars += len(content)
        if self.inputs_left < 0:
            raise ExtractionError(
                f"the sources \\input or \\include files more than {self.max_inputs} times",
                file=self.file,
            )
        if self.chars > self.max_chars:
            raise ExtractionError(
                "the sources grow beyond "
                f"{self.max_chars // 2**20} MB once their \\input files are inlined",
                file=self.file,
            )


def _inline_inputs(tex: str, files: dict[str, str], budget: _InlineBudget, depth: int = 0) -> str:
    if depth > 10 or not files:
        return tex

    def repl(m: re.Match[str]) -> str:
        name = m.group(2).strip()
        for candidate in (name, f"{name}.tex"):
            key = str(PurePosixPath(candidate))
            for path, content in files.items():
                if path == key or path.endswith("/" + key):
                    budget.spend(content)
                    return _inline_inputs(_strip_comments(content), files, budget, depth + 1)
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


_HEAD_RE = re.compile(r"\\item\s*(?:\{\\bf\s+([^}]*)\}|\\textbf\s*\{([^}]*)\})")
_OPENING_RES = {
    n: re.compile(r"Question\s*:\s*" + r"\s+".join(re.escape(w) for w in text.split()), re.I)
    for n, text in QUESTION_OPENINGS.items()
}


def _number_by_opening(segment: str) -> int | None:
    head = segment[:800]
    return next((n for n, pattern in _OPENING_RES.items() if pattern.search(head)), None)


def _latex_answer(number: int, segment: str, labels: dict[str, str]) -> ExtractedAnswer:
    status: Status = "found"
    problem = ""
    macro = _ANSWER_MACRO_RE.search(segment)
    if macro:
        raw = f"\\answer{macro.group(1)}{{}}"
        answer = normalize_answer(macro.group(1))
    else:
        m = re.search(r"Answer\s*:\s*([^\n\\]*)", segment)
        raw = m.group(1).strip() if m else ""
        if m is None:
            problem = "no 'Answer:' line found; read as TODO"
        try:
            answer = normalize_answer(raw)
        except AnswerNotRecognized as exc:
            answer, status, problem = "TODO", "unrecognized", str(exc)
    justification = ""
    j = re.search(r"Justification\s*:", segment)
    if j:
        rest = segment[j.end() :]
        g = re.search(r"\\item\s*\[\]\s*Guidelines|Guidelines\s*:", rest)
        chunk = rest[: g.start()] if g else rest
        if not re.search(r"\\justificationTODO", chunk):
            justification = clean_inline(_latex_to_text(chunk, labels))
    return ExtractedAnswer(
        number,
        QUESTION_TITLES[number],
        answer,
        raw[:100],
        justification,
        status=status,
        problem=problem,
    )


def _latex_questions(region: str, *, labels: dict[str, str] | None = None) -> list[ExtractedAnswer]:
    """One finding per question; hand-written checklists without the template's items are
    read as plain text ("1. Claims", "Question: ...")."""
    heads = list(_HEAD_RE.finditer(region))
    if not heads:
        answers, _ = read_checklist_text(_latex_to_text(region, {}))
        return answers
    segments: dict[int, str] = {}
    expected = QUESTION_NUMBERS[0]
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(region)
        segment = region[head.end() : end]
        number = _number_by_opening(segment) or expected
        if number in segments or number not in QUESTION_TITLES:
            continue
        segments[number] = segment
        expected = number + 1
    return [
        _latex_answer(n, segments[n], labels or {}) if n in segments else missing_answer(n)
        for n in QUESTION_NUMBERS
    ]


def extract_latex(
    tex: str,
    *,
    files: dict[str, str] | None = None,
    word_cap: int = DEFAULT_WORD_CAP,
    file: str = "",
    source_format: str = "tex",
    max_inputs: int = MAX_INPUT_EXPANSIONS,
    max_chars: int = MAX_INLINED_CHARS,
) -> ExtractedPaper:
    budget = _InlineBudget(max_inputs=max_inputs, max_chars=max_chars, file=file)
    # NUL is never text in a paper, and PostgreSQL refuses it in a text column: dropped.
    files = {path: strip_nul(content) for path, content in (files or {}).items()}
    tex = _inline_inputs(_strip_comments(strip_nul(tex)), files, budget)
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
    answers = _latex_questions(tex[start:], labels=labels)
    body_text = _latex_to_text(numbered, labels)
    body, words, truncated = cap_words(body_text, word_cap)
    return ExtractedPaper(answers, body, words, truncated, source_format, title=title[:500])
