"""Reading the checklist out of plain text (a PDF's cleaned text layer, or LaTeX made plain).

The template prints each question as a numbered heading ("4. Experimental Result
Reproducibility") followed by "Question:", "Answer:", "Justification:" and "Guidelines:".
Headings are looked for in order, each by its number and the first word of its title, then
by its number alone, then by the opening words of its question: a heading that the layout
broke or the authors reworded still leaves the question findable, and numbered lines inside
a justification are not taken for headings. A question found none of these ways is reported
missing, by number and title, without failing the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from scoring.checklist.findings import ExtractedAnswer, ExtractedPaper, Status, missing_answer
from scoring.checklist.normalize import AnswerNotRecognized, normalize_answer
from scoring.checklist.pdf_text import join_hyphenated
from scoring.checklist.questions import QUESTION_NUMBERS, QUESTION_TITLES

# The first word of each title as the 2024 and 2025 templates print it (prefixes).
TITLE_WORDS: dict[int, str] = {
    1: "Claims",
    2: "Limitation",
    3: "Theor",
    4: "Experiment",
    5: "Open",
    6: "Experiment",
    7: "Experiment",
    8: "Experiment",
    9: "Code",
    10: "Broader",
    11: "Safeguard",
    12: "Licens",
    13: "New",
    14: "Crowdsourcing",
    15: "Institutional",
}
# The opening words of each question in the template.
QUESTION_OPENINGS: dict[int, str] = {
    1: "Do the main claims made in the abstract",
    2: "Does the paper discuss the limitations",
    3: "For each theoretical result",
    4: "Does the paper fully disclose all the information needed",
    5: "Does the paper provide open access to the data and code",
    6: "Does the paper specify all the training and test details",
    7: "Does the paper report error bars",
    8: "For each experiment, does the paper provide sufficient information on the comput",
    9: "Does the research conducted in the paper conform",
    10: "Does the paper discuss both potential positive societal impacts",
    11: "Does the paper describe safeguards",
    12: "Are the creators or original owners of assets",
    13: "Are new assets introduced in the paper well documented",
    14: "For crowdsourcing experiments and research with human subjects",
    15: "Does the paper describe potential risks incurred by study participants",
}

HEADING_RE = re.compile(r"NeurIPS\s+Paper\s+Checklist", re.IGNORECASE)
_ANSWER_RE = re.compile(r"Answer\s*:[ \t]*\n?[ \t]*(\[[^\]\n]*\]|[^\n]*)", re.IGNORECASE)
# "fi" may come out of a PDF as a ligature, a replacement character, a space or nothing.
_JUSTIFICATION_RE = re.compile(r"Justi(?:fi|\S)?\s?cation\s*:", re.IGNORECASE)
_GUIDELINES_RE = re.compile(r"Guidelines\s*:", re.IGNORECASE)
_QUESTION_LINE_RE = re.compile(r"Question\s*:", re.IGNORECASE)
# A page number alone on a line, left between a question's lines by PDF text extraction.
_PAGE_NUMBER_LINE = re.compile(r"(?m)^\s*\d{1,3}\s*$\n?")
_TODO_JUSTIFICATION = re.compile(r"\\?justificationTODO(\{\})?|TODO|\[TODO\]", re.IGNORECASE)
# A heading after the checklist: References, an appendix ("A Proofs", "B.2 Data").
_HEADING_AFTER = re.compile(
    r"(?m)^[ \t]*(?:(?:References|Bibliography|Appendix|Appendices|Supplementary Material)\b"
    r"[^\n]{0,60}|(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*[ \t]+[A-Z][^\n.,;:]{2,70})[ \t]*$"
)


def clean_inline(text: str) -> str:
    """A justification on one line: page numbers dropped, hyphenation undone."""
    text = _PAGE_NUMBER_LINE.sub("", text)
    return re.sub(r"\s+", " ", join_hyphenated(text)).strip()


def _first_question_near(text: str, start: int) -> bool:
    window = text[start : start + 700]
    return bool(re.search(r"(?m)^\s*1\s*\.\s*\S", window)) or bool(
        re.search(re.escape(QUESTION_OPENINGS[1][:20]), window, re.IGNORECASE)
    )


def checklist_start(text: str) -> int | None:
    """The heading that the numbered questions follow (a table of contents may name it too);
    without one, the first question when the template's question and answer lines follow."""
    best = None
    for m in HEADING_RE.finditer(text):
        if _first_question_near(text, m.end()):
            best = m.start()
    if best is not None:
        return best
    for m in re.finditer(r"(?m)^[ \t]*1\s*\.\s*Claims\b", text):
        if _ANSWER_RE.search(text, m.end(), m.end() + 1500):
            best = m.start()
    return best


def _heading_patterns(number: int) -> list[tuple[re.Pattern[str], bool]]:
    """Ways to find a question's start, strongest first; True where a "Question:" or
    "Answer:" line must follow closely for the match to count."""
    opening = r"\s+".join(re.escape(w) for w in QUESTION_OPENINGS[number].split())
    return [
        (re.compile(rf"(?mi)^[ \t]*{number}\s*\.\s*{TITLE_WORDS[number]}"), False),
        (re.compile(rf"(?m)^[ \t]*{number}\s*\.\s+\S"), True),
        (re.compile(rf"(?i)Question\s*:\s*{opening}"), False),
    ]


def _followed_by_question(region: str, end: int) -> bool:
    window = region[end : end + 400]
    return bool(_QUESTION_LINE_RE.search(window) or _ANSWER_RE.search(window))


def _search(number: int, region: str, pos: int, bound: int) -> re.Match[str] | None:
    for pattern, needs_question in _heading_patterns(number):
        for m in pattern.finditer(region, pos, bound):
            if not needs_question or _followed_by_question(region, m.end()):
                return m
    return None


def find_question_starts(region: str) -> dict[int, int]:
    """Offsets of the question headings, found in order. A question is looked for only up to
    the next later question's title heading, so one lost heading cannot swallow the rest."""
    strong = {n: _heading_patterns(n)[0][0] for n in QUESTION_NUMBERS}
    starts: dict[int, int] = {}
    pos = 0
    for i, number in enumerate(QUESTION_NUMBERS):
        later = (strong[n].search(region, pos) for n in QUESTION_NUMBERS[i + 1 :])
        bound = min((m.start() for m in later if m), default=len(region))
        m = _search(number, region, pos, bound)
        if m is None:
            continue
        starts[number] = m.start()
        pos = m.end()
    return starts


def checklist_end(region: str, last_start: int) -> int:
    """Where the checklist ends: the first heading after the last question's guidelines (or
    its justification when the guidelines were removed); the region's end without one."""
    after = last_start
    for marker in (_GUIDELINES_RE, _JUSTIFICATION_RE, _ANSWER_RE):
        m = marker.search(region, last_start)
        if m:
            after = m.end()
            break
    heading = _HEADING_AFTER.search(region, after)
    return heading.start() if heading else len(region)


def _raw_answer(segment: str) -> str:
    m = _ANSWER_RE.search(segment)
    if m is None:
        return ""
    raw = m.group(1).strip()
    if raw and not raw.startswith("["):
        # "Answer: Yes Justification: ..." on one line: keep the answer only.
        j = _JUSTIFICATION_RE.search(raw)
        raw = raw[: j.start()].strip() if j else raw
    return raw


def parse_question(number: int, segment: str, *, page: int | None = None) -> ExtractedAnswer:
    """One question's answer and justification from its segment of the checklist."""
    raw = _raw_answer(segment)
    problem = "" if _ANSWER_RE.search(segment) else "no 'Answer:' line found; read as TODO"
    status: Status = "found"
    try:
        answer = normalize_answer(raw)
    except AnswerNotRecognized as exc:
        answer, status, problem = "TODO", "unrecognized", str(exc)
    justification = ""
    j = _JUSTIFICATION_RE.search(segment)
    if j:
        rest = segment[j.end() :]
        g = _GUIDELINES_RE.search(rest)
        justification = clean_inline(rest[: g.start()] if g else rest)
    elif (a := _ANSWER_RE.search(segment)) is not None:
        # The label left out (the answer line, a sentence, then "Guidelines:"): the text
        # between the answer and the guidelines is the justification. Without guidelines to
        # end it, what follows the answer could be anything, so nothing is taken.
        rest = segment[a.end() :]
        if (g := _GUIDELINES_RE.search(rest)) is not None:
            justification = clean_inline(rest[: g.start()])
    if _TODO_JUSTIFICATION.fullmatch(justification):
        justification = ""
    return ExtractedAnswer(
        number=number,
        title=QUESTION_TITLES[number],
        answer=answer,
        raw_answer=raw[:100],
        justification=justification,
        page=page,
        status=status,
        problem=problem,
    )


def read_checklist_text(
    region: str, *, page_at: Callable[[int], int] | None = None
) -> tuple[list[ExtractedAnswer], int]:
    """Every question's finding from the checklist region (plain text from its heading on),
    and the offset where the checklist ends. ``page_at`` maps an offset to its page."""
    starts = find_question_starts(region)
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    end = checklist_end(region, ordered[-1][1]) if ordered else len(region)
    found: dict[int, ExtractedAnswer] = {}
    for i, (number, start) in enumerate(ordered):
        stop = ordered[i + 1][1] if i + 1 < len(ordered) else end
        page = page_at(start) if page_at else None
        found[number] = parse_question(number, region[start:stop], page=page)
    return [found.get(n) or missing_answer(n) for n in QUESTION_NUMBERS], end


def parse_checklist_text(region: str, *, file: str = "") -> list[ExtractedAnswer]:
    """All 15 answers from the checklist region, or ExtractionError naming what is missing."""
    answers, _ = read_checklist_text(region)
    ExtractedPaper(answers, "", 0, False, "text").require_complete(file=file)
    return answers
