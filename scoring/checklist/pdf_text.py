"""The text layer of a PDF's pages, cleaned of what the layout adds to the words.

pypdf returns each page's text in drawing order. Real submissions add, between and inside
the lines that extraction reads:

- line numbers of review mode (``lineno``), glued to a line's end (``Answer: [Yes]645``), to
  its start (``645 Answer``), or alone on a line, zero-padded in some templates (``037``);
- running headers and footers and page numbers, repeated on every page;
- ligature characters (``ﬁ``, ``ﬂ``), soft hyphens and non-breaking spaces.

Line numbers are told from numbers that belong to the text by their sequence: they grow by
one from line to line through the whole paper (or restart on each page), which a table's or a
sentence's final number does not do for long. The longest such chain is taken as the line
numbers only when it covers a good share of the lines.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field

CHARACTER_MAP = {  # ligatures spelled out, invisible characters and odd spaces made plain
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "ft",
    "\ufb06": "st",
    "\u00ad": "",  # soft hyphen
    "\u200b": "",
    "\u200c": "",
    "\u200d": "",
    "\ufeff": "",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u2010": "-",
    "\u2011": "-",
}
_CHARACTER_TABLE = str.maketrans(CHARACTER_MAP)

# A chain step may skip this many numbers (lines pypdf merged) and this many text lines
# (a figure's or a table's unnumbered text between two numbered lines).
MAX_NUMBER_STEP = 8
MAX_LINE_GAP = 80
# The chain must cover this share of the non-empty lines, most of its steps must be +1.
MIN_CHAIN = 10
MIN_COVERAGE = 0.3
MIN_UNIT_STEPS = 0.6
# A tie-break between chains of one length, per digit of each number.
DIGIT_BONUS = 1e-3
# Lines around a gap in the chain where a skipped number is looked for.
GAP_WINDOW = 10
# Numbering that restarts on each page restarts within this many lines of the page's top.
RESTART_LINES = 6
# Header and footer candidates: this many lines at the top and bottom of a page.
EDGE_LINES = 2
_MARKER = re.compile(
    r"^\s*(?:\d{1,2}\s*\.\s|•|(?:Question|Answer|Justification|Guidelines)\s*:)", re.IGNORECASE
)
_PAGE_NUMBER = re.compile(
    r"^\s*(?:\d{1,4}|[ivxlc]{1,7}|page\s+\d{1,4}(?:\s+of\s+\d{1,4})?"
    r"|[-\u2013]\s*\d{1,4}\s*[-\u2013])\s*$",
    re.IGNORECASE,
)
_TRAILING_DIGITS = re.compile(r"([0-9]{1,8})\s*$")
_LEADING_DIGITS = re.compile(r"^\s*([0-9]{1,8})")


def normalize_characters(text: str) -> str:
    """Ligatures spelled out, invisible and non-breaking spaces made plain."""
    return text.translate(_CHARACTER_TABLE)


@dataclass(frozen=True)
class CleanText:
    """The pages' cleaned text joined by newlines, with each page's start offset."""

    text: str
    page_starts: list[int]
    notes: list[str] = field(default_factory=list)

    def page_at(self, offset: int) -> int:
        """The 1-based page that holds ``offset`` of ``text``."""
        return max(1, bisect.bisect_right(self.page_starts, offset))


@dataclass(frozen=True)
class _Candidate:
    line: int
    value: int
    keeps: dict[int, str]  # digits used -> the line without them


def _candidates(index: int, line: str) -> list[_Candidate]:
    """The numbers a line could carry as its line number, with the line left without it."""
    text = line.strip()
    if not text:
        return []
    if re.fullmatch(r"[0-9]+", text):
        return [_Candidate(index, int(text), {len(text): ""})] if len(text) <= 5 else []
    found: dict[int, dict[int, str]] = {}
    end = _TRAILING_DIGITS.search(line)
    if end:
        run = end.group(1)
        for k in range(1, min(len(run), 5) + 1):
            keep = line[: end.start(1) + len(run) - k].rstrip()
            found.setdefault(int(run[-k:]), {})[k] = keep
    start = _LEADING_DIGITS.match(line)
    if start:
        run, rest = start.group(1), line[start.end(1) :]
        for k in range(1, min(len(run), 5) + 1):
            if k == len(run) and rest[:1] in (".", ")", ",", "%"):
                continue  # "1. Claims", "3) ...": a list number, not a line number
            found.setdefault(int(run[:k]), {}).setdefault(k, (run[k:] + rest).strip())
    return [_Candidate(index, value, keeps) for value, keeps in found.items()]


def _longest_chain(
    candidates: list[list[_Candidate]], page_of_line: list[int], line_on_page: list[int]
) -> list[_Candidate]:
    """The longest run of candidates whose numbers grow by 1..MAX_NUMBER_STEP, steps of +1
    counting double, allowing a restart at 0 or 1 near the top of a new page."""
    # value -> (score, line, node); nodes hold (candidate, parent node)
    best: dict[int, tuple[float, int, int]] = {}
    nodes: list[tuple[_Candidate, int]] = []
    scores: list[float] = []
    # The best node so far, and the best one on the pages before the current line's.
    best_so_far: tuple[float, int] = (0.0, -1)
    best_before_page: tuple[float, int] = (0.0, -1)
    current_page = -1
    for index, line_candidates in enumerate(candidates):
        if page_of_line[index] != current_page:
            current_page = page_of_line[index]
            best_before_page = best_so_far
        fresh: list[tuple[int, float, int]] = []
        for cand in line_candidates:
            # Among equally long chains the one reading more digits wins: "Table 3637"
            # then "0.95638" chain as 37, 38 as well as 637, 638, and 637 is the number.
            bonus = DIGIT_BONUS * len(str(cand.value))
            score, parent = 1.0 + bonus, -1
            for step in range(1, MAX_NUMBER_STEP + 1):
                prev = best.get(cand.value - step)
                if prev is None or index - prev[1] > MAX_LINE_GAP:
                    continue
                gain = (2.0 if step == 1 else 1.0) + bonus
                if prev[0] + gain > score:
                    score, parent = prev[0] + gain, prev[2]
            restart = cand.value <= 1 and line_on_page[index] < RESTART_LINES
            if restart and best_before_page[1] >= 0 and best_before_page[0] + 1 > score:
                score, parent = best_before_page[0] + 1, best_before_page[1]
            nodes.append((cand, parent))
            scores.append(score)
            fresh.append((cand.value, score, len(nodes) - 1))
        for value, score, node in fresh:
            held = best.get(value)
            if held is None or score >= held[0] or index - held[1] > MAX_LINE_GAP:
                best[value] = (score, index, node)
            if score > best_so_far[0]:
                best_so_far = (score, node)
    if not nodes:
        return []
    node = max(range(len(nodes)), key=lambda n: scores[n])
    chain: list[_Candidate] = []
    while node >= 0:
        cand, parent = nodes[node]
        chain.append(cand)
        node = parent
    return chain[::-1]


def _is_line_numbering(chain: list[_Candidate], nonempty: int) -> bool:
    if len(chain) < MIN_CHAIN or len(chain) < MIN_COVERAGE * nonempty:
        return False
    unit = sum(1 for a, b in itertools.pairwise(chain) if b.value - a.value == 1)
    return unit >= MIN_UNIT_STEPS * (len(chain) - 1)


def _gap_fillers(chain: list[_Candidate], candidates: list[list[_Candidate]]) -> list[_Candidate]:
    """Numbers the chain skipped, found on nearby lines that pypdf put out of order (a table's
    cells): only a value missing between two chain neighbours is taken, one line each."""
    on_chain = {c.line for c in chain}
    fillers: list[_Candidate] = []
    for a, b in itertools.pairwise(chain):
        if not 1 < b.value - a.value <= MAX_NUMBER_STEP:
            continue
        wanted = set(range(a.value + 1, b.value))
        lo, hi = max(0, a.line - GAP_WINDOW), min(len(candidates), b.line + GAP_WINDOW + 1)
        for index in range(lo, hi):
            if index in on_chain:
                continue
            match = next((c for c in candidates[index] if c.value in wanted), None)
            if match is not None:
                wanted.discard(match.value)
                on_chain.add(index)
                fillers.append(match)
    return fillers


def _strip_line_numbers(pages: list[list[str]]) -> int:
    """Remove review-mode line numbers in place; returns how many were removed."""
    flat = [(p, i, line) for p, lines in enumerate(pages) for i, line in enumerate(lines)]
    candidates = [_candidates(n, line) for n, (_, _, line) in enumerate(flat)]
    page_of_line = [p for p, _, _ in flat]
    chain = _longest_chain(candidates, page_of_line, [i for _, i, _ in flat])
    if not _is_line_numbering(chain, sum(1 for _, _, line in flat if line.strip())):
        return 0
    chain = chain + _gap_fillers(chain, candidates)
    # Zero-padded numbers ("037") are stripped with their zeros when the paper pads them.
    small = [c for c in chain if c.value < 100]
    padded = sum(1 for c in small if 3 in c.keeps) > 0.8 * len(small) if small else False
    for cand in chain:
        page, index, _ = flat[cand.line]
        width = 3 if padded and 3 in cand.keeps else min(cand.keeps)
        pages[page][index] = cand.keeps[width]
    return len(chain)


def _edge_indices(lines: list[str]) -> list[int]:
    """Indices of the first and last EDGE_LINES non-empty lines of a page."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return sorted(set(filled[:EDGE_LINES] + filled[-EDGE_LINES:]))


def _edge_key(line: str) -> str:
    """A header line up to the page number that starts or ends it ("12 Under review")."""
    return re.sub(r"\s+", " ", re.sub(r"^\d+|\d+$", "#", line.strip().lower()))


def _strip_running_lines(pages: list[list[str]]) -> tuple[int, int]:
    """Remove page numbers and running headers/footers from the pages' edges, in place.

    A header or footer is an edge line that recurs (its page number aside) on at least 3 pages
    and half of them; checklist lines ("Answer: [Yes]", "Guidelines:") are never taken for one.
    """
    counts: Counter[str] = Counter()
    for lines in pages:
        edges = (lines[i] for i in _edge_indices(lines))
        keys = {_edge_key(line) for line in edges if not _MARKER.match(line)}
        counts.update(k for k in keys if len(k.replace("#", "").strip()) >= 3 and len(k) <= 160)
    threshold = max(3, 0.5 * len(pages))
    running = {k for k, n in counts.items() if n >= threshold}
    headers = numbers = 0
    for lines in pages:
        for i in _edge_indices(lines):
            if _PAGE_NUMBER.match(lines[i]):
                lines[i] = ""
                numbers += 1
            elif _edge_key(lines[i]) in running and not _MARKER.match(lines[i]):
                lines[i] = ""
                headers += 1
    return headers, numbers


def clean_pages(raw_pages: list[str]) -> CleanText:
    """Normalize characters, then remove line numbers, page numbers, headers and footers."""
    pages = [normalize_characters(page).splitlines() for page in raw_pages]
    notes: list[str] = []
    removed = _strip_line_numbers(pages)
    if removed:
        notes.append(f"review-mode line numbers removed ({removed} lines)")
    headers, _ = _strip_running_lines(pages)
    if headers:
        notes.append(f"running headers/footers removed ({headers} lines)")
    texts = ["\n".join(line for line in lines if line.strip()) for lines in pages]
    starts: list[int] = []
    offset = 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    return CleanText("\n".join(texts), starts, notes)


def join_hyphenated(text: str) -> str:
    """Join words broken at a line end: "Experi-\\nments" is one word again, while a compound
    broken at its own hyphen before a capital or a digit ("AI-\\nReviewer") keeps it."""
    text = re.sub(r"([^\W\d_])-[ \t]*\n[ \t]*([a-z])", r"\1\2", text)
    return re.sub(r"(\w)-[ \t]*\n[ \t]*([A-Z0-9])", r"\1-\2", text)


# --- The title --------------------------------------------------------------------------------

# Runs of the first page looked at: the title is near the top, before the abstract.
TITLE_RUNS = 80
# Font sizes this close (points) are one size: a title's lines are set in one size.
SIZE_TOLERANCE = 0.6
# Marks set smaller inside or after a title (footnote stars, daggers, 1) are left out.
_TITLE_MARK = re.compile(r"^[\W\d_]{1,4}$")
_TITLE_TRAILING_MARKS = re.compile("[\\s\u2217*\u2020\u2021\u00a7\u00b6#%]+$")
MAX_TITLE_CHARS = 300


def _join_title_lines(parts: list[str]) -> str:
    """Lines of a title as one line: a line broken after a hyphen keeps it, unspaced."""
    text = ""
    for part in parts:
        for line in normalize_characters(part).splitlines():
            line = " ".join(line.split())
            if not line:
                continue
            if not text:
                text = line
            elif text.endswith("-") and text[-2:-1].isalpha():
                # "Meta-" + "Album": titles are not hyphenated by the layout, so a line that
                # ends in a hyphen breaks a compound, whose hyphen stays.
                text += line
            else:
                text = f"{text} {line}"
    return _TITLE_TRAILING_MARKS.sub("", text).strip()


def title_from_runs(runs: list[tuple[str, float]]) -> str:
    """A paper's title from its first page's text runs, ``(text, font size in points)``.

    The title is the first stretch of runs in the largest font among the page's first
    ``TITLE_RUNS``: every one of its lines, however many the layout broke it into ("Meta-Album:
    Multi-domain Meta-Dataset for" / "Few-Shot Image Classification"). Small marks set inside
    or after it (footnote stars) are left out; the first other run ends it. Empty when the page
    has no text with a size, or its largest text is too short to be a title (a big page number,
    a logo's letter).
    """
    head = [(text, size) for text, size in runs[:TITLE_RUNS] if text.strip() and size > 0]
    sized = [size for text, size in head if sum(ch.isalnum() for ch in text) >= 3]
    if not sized:
        return ""
    largest = max(sized)
    parts: list[str] = []
    for text, size in head:
        if abs(size - largest) <= SIZE_TOLERANCE:
            parts.append(text)
        elif parts and size < largest and _TITLE_MARK.match(text.strip()):
            continue
        elif parts:
            break
    title = _join_title_lines(parts)[:MAX_TITLE_CHARS]
    return title if sum(ch.isalpha() for ch in title) >= 4 else ""
