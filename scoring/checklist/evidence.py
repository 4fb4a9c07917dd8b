"""Where the offline checklist judge looks for evidence: sections, sentences, stuffing.

The judge used to count its topic words anywhere in the paper text, so a paragraph of those
words appended to any paper made every "Yes" correct. Here the paper is read as sections
(numbered or lettered headings, so that "Section 4.2" in a justification can be looked up)
and sentences, and a sentence is evidence only if it reads as text about the topic, not as a
list of the judge's keywords. :func:`is_stuffed` sets aside a sentence that touches six
checklist topics or more, or one with under 20% function words (real sentences have 30-40%;
the words inside the keywords, as in "does not generalize", do not count) made mostly of topic
words, or of the topic words of three questions. Each sentence is also judged with its two
neighbours, so keywords cut into short "sentences" are caught. Tables, lists of settings
with their values and reference lists are low in function words too, but they carry figures
or name few topics, so they stay usable: a license table is evidence on licenses.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass

_FUNCTION_WORDS_TEXT = """
a an the of to in on at by for with from into onto over under between among through during
about against and or but nor so yet if then than that this these those there here which who
whom whose what when where while how why as is are was were be been being am do does did done
has have had having can could may might must shall should will would not no we our us they
them their it its he she his her you your one also only such each every all any both either
neither some more most other another same
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
_WORD = re.compile(r"[a-z][a-z0-9'\u2019-]*|±")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# A numbered ("4", "4.2") or lettered ("B", "B.1") heading on a line of its own: a short
# title that starts with a capital, does not end like a sentence and is mostly letters.
_HEADING = re.compile(
    r"(?m)^[ \t]*(?:Appendix[ \t]+)?(?P<ref>(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*)\.?[:.]?[ \t]+"
    r"(?P<title>[A-Z][^\n]{0,78}?)[ \t]*$"
)
_END_MATTER = re.compile(r"(?mi)^[ \t]*(?:references|bibliography|acknowledge?ments?)[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[“\"])")


@dataclass(frozen=True)
class Section:
    ref: str  # "4.2", "B"
    title: str
    start: int
    end: int  # where the section, subsections included, ends

    @property
    def label(self) -> str:
        return f"{self.ref} {self.title}"


def _is_heading_title(title: str) -> bool:
    letters = sum(c.isalpha() for c in title)
    visible = sum(not c.isspace() for c in title)
    return not title.endswith((".", ",", ";")) and visible > 0 and letters >= 0.6 * visible


def sections(text: str) -> list[Section]:
    """Headings in order, each ending where a heading outside it (or the end matter) starts."""
    heads = [
        (m.group("ref"), m.group("title").strip(), m.start())
        for m in _HEADING.finditer(text)
        if _is_heading_title(m.group("title").strip())
    ]
    stops = [m.start() for m in _END_MATTER.finditer(text)]
    out = []
    for i, (ref, title, start) in enumerate(heads):
        end = len(text)
        for other, _, other_start in heads[i + 1 :]:
            if not other.startswith(ref + "."):
                end = other_start
                break
        end = min([end, *(s for s in stops if s > start)])
        out.append(Section(ref, title, start, end))
    return out


def find_section(text: str, ref: str) -> Section | None:
    """The section a justification cites ("3.2", "E"), subsections included, or None.

    Its heading is found by a lenient pattern (any capitalised title on the line), so that
    every heading a reader would accept counts as existing; it ends at the next heading
    outside it.
    """
    pattern = (
        rf"(?m)^[ \t]*(?:Appendix\s+|Section\s+)?{re.escape(ref)}\.?[:.]?\s+[A-Z][^\n]{{0,120}}$"
    )
    m = re.search(pattern, text)
    if m is None:
        return None
    end = len(text)
    for other in sections(text):
        if other.start > m.start() and other.ref != ref and not other.ref.startswith(ref + "."):
            end = other.start
            break
    stops = [s.start() for s in _END_MATTER.finditer(text) if s.start() > m.start()]
    title = m.group(0).strip().removeprefix("Appendix").removeprefix("Section").strip()
    title = title.removeprefix(ref).lstrip(".: \t")
    return Section(ref, title, m.start(), min([end, *stops]))


def named_sections(text: str, justification: str) -> list[Section]:
    """Sections whose title the justification names ("see the Limitations section")."""
    lowered = " ".join(justification.lower().split())
    found = []
    for s in sections(text):
        title = " ".join(s.title.lower().split())
        if len(title) >= 8 and re.search(rf"\b{re.escape(title)}\b", lowered):
            found.append(s)
    return found


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs: paragraphs and heading lines apart, line breaks joined."""
    cuts = {0, len(text)}
    cuts.update(m.end() for m in re.finditer(r"\n[ \t]*\n", text))
    for m in _HEADING.finditer(text):
        cuts.update((m.start(), m.end()))
    bounds = sorted(cuts)
    out: list[tuple[int, str]] = []
    for a, b in itertools.pairwise(bounds):
        start = a
        for stop, after in [
            *((m.start(), m.end()) for m in _SENTENCE_END.finditer(text, a, b)),
            (b, b),
        ]:
            flat = " ".join(text[start:stop].split())
            if flat:
                out.append((start, flat))
            start = after
    return out


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Topics:
    """The judge's topic terms per question, with the words they are made of."""

    terms: Mapping[int, tuple[str, ...]]
    vocabulary: frozenset[str]
    stems: tuple[str, ...]  # terms written as prefixes match longer words ("reproduc")
    phrases: tuple[str, ...]  # every term, longest first

    @classmethod
    def of(cls, terms: Mapping[int, tuple[str, ...]]) -> Topics:
        every = {t for ts in terms.values() for t in ts}
        whole: set[str] = set()
        for term in every:
            whole.update(w for w in words(term) if w not in FUNCTION_WORDS)
        stems = tuple(sorted(w for w in whole if len(w) >= 5))
        return cls(terms, frozenset(whole), stems, tuple(sorted(every, key=lambda t: -len(t))))

    def questions_in(self, text: str) -> list[int]:
        lowered = text.lower()
        return [n for n, ts in self.terms.items() if any(t in lowered for t in ts)]


# A sentence on six checklist topics or more is about none of them (in the bundled papers a
# sentence touches at most four, three consecutive sentences at most five).
BROAD_SENTENCE = 6
BROAD_WINDOW = 8


def is_stuffed(sentence: str, topics: Topics, *, broad: int = BROAD_SENTENCE) -> bool:
    """A run of the judge's keywords rather than a sentence about them.

    Topic words of ``broad`` questions or more, whatever the grammar; or under 20% function
    words and either topic words of three questions or more (a quarter of the words at
    least), or mostly topic words without the figures that a real list of settings carries
    ("learning rate 0.1, batch size 32, 100 epochs").
    """
    tokens = words(sentence)
    numbers = len(_NUMBER.findall(sentence))
    size = len(tokens) + numbers
    if len(tokens) < 3:
        return False
    if len(topics.questions_in(sentence)) >= broad:
        return True
    # Function words inside the keywords ("does not generalize", "code is available") are
    # not grammar: count only those around them.
    rest = sentence.lower()
    for term in topics.phrases:
        rest = rest.replace(term, " ")
    function = sum(1 for w in words(rest) if w in FUNCTION_WORDS)
    if function >= 0.2 * size:
        return False
    topical = sum(1 for w in tokens if w in topics.vocabulary or w.startswith(topics.stems))
    if topical >= 0.25 * size and len(topics.questions_in(sentence)) >= 3:
        return True
    return topical >= 0.5 * size and numbers < 0.1 * size


@dataclass(frozen=True)
class Reading:
    """A paper's text split once: its sections and its sentences with stuffing set aside."""

    text: str
    sections: list[Section]
    kept: list[tuple[int, str]]  # (offset, sentence) of usable sentences
    stuffed: int  # sentences set aside as keyword stuffing

    @classmethod
    def of(cls, text: str, topics: Topics) -> Reading:
        # Heading lines are not sentences (the judge reads headings apart).
        headings = {m.start() for m in _HEADING.finditer(text)}
        items = [(at, s) for at, s in sentences(text) if at not in headings]
        alone = [is_stuffed(s, topics) for _, s in items]
        kept: list[tuple[int, str]] = []
        stuffed = 0
        for i, (at, sentence) in enumerate(items):
            # Keywords cut into short "sentences" are caught with their neighbours.
            window = " ".join(s for _, s in items[max(0, i - 1) : i + 2])
            if alone[i] or is_stuffed(window, topics, broad=BROAD_WINDOW):
                stuffed += 1
            else:
                kept.append((at, sentence))
        return cls(text, sections(text), kept, stuffed)

    def within(self, spans: list[Section] | None) -> list[str]:
        """Usable sentences inside the given sections (all of them when ``spans`` is None)."""
        if spans is None:
            return [s for _, s in self.kept]
        return [s for at, s in self.kept if any(sec.start <= at < sec.end for sec in spans)]

    def section_has_text(self, section: Section, min_words: int = 6) -> bool:
        return any(len(words(s)) >= min_words for s in self.within([section]))
