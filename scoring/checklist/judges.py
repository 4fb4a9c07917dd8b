"""Checklist judges: each decides whether one checklist answer is correct (c = 1) or not.

All judges answer one vote at a time (``vote(item, vote_number)``) so that every judge goes
through the same consensus (:func:`assess_item`): one vote, more only where the first failed
or is unsure (or always two, a third on disagreement: CHECKLIST_VOTES).

- :class:`OfflineChecklistJudge`: deterministic evidence checks, no network (the default).
- :class:`RecordedChecklistJudge`: assessments already made (the challenge's CSV files).
- ``scoring.checklist.openai_judge.OpenAIChecklistJudge``: an LLM through the shared layer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from pydantic import BaseModel, Field, PrivateAttr

from scoring.checklist.evidence import Reading, Topics, find_section, named_sections, words
from scoring.checklist.questions import QUESTION_TITLES, label
from scoring.judges.consensus import (
    ConsensusResult,
    VoteFailed,
    confirm_unsure,
    first_valid,
    run_consensus,
)


@dataclass(frozen=True)
class ChecklistItem:
    """One answer to judge, with what the judge may read."""

    paper_kind: str  # G, A or T
    number: int
    title: str
    question: str
    guidelines: str
    answer: str  # normalized: Yes, No, NA (TODO is never judged)
    justification: str
    paper_text: str


class ChecklistVerdict(BaseModel):
    correct: bool = Field(description="True when the answer and justification are correct.")
    # No maxLength for OpenAI (strict structured outputs reject it; stored feedback is cut
    # instead); llama.cpp's grammar gets this bound (scoring.judges.wire).
    feedback: str = Field(
        default="",
        description="Short feedback for the authors.",
        json_schema_extra={"x-max-chars": 600},
    )
    # Set by a judge that read only part of the paper (cut to fit the server's context); not
    # part of the answer's schema.
    _partial: bool = PrivateAttr(default=False)


class ChecklistJudge(Protocol):
    @property
    def name(self) -> str: ...

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict: ...


def classify(verdict: ChecklistVerdict) -> str:
    return "1" if verdict.correct else "0"


# How many votes an answer gets (CHECKLIST_VOTES).
ADAPTIVE, TWO, SINGLE = "adaptive", "two", "single"
VOTE_POLICIES = (ADAPTIVE, TWO, SINGLE)

# A judge that says it could not tell: its verdict is a guess that a second vote may overturn.
_HEDGE = re.compile(
    r"\b(?:unclear|uncertain|not (?:entirely |fully )?clear|not sure|unsure|ambiguous"
    r"|cannot (?:be )?(?:determine|determined|verif\w*|assess\w*|tell|confirm\w*|judge)"
    r"|can't (?:determine|verify|tell|confirm|judge)"
    r"|(?:unable|impossible|not possible|hard|difficult) to (?:determine|verify|assess|tell|say"
    r"|confirm|judge)"
    r"|(?:insufficient|not enough|limited) (?:information|evidence|context|text)"
    r"|may or may not|hard to say|partially|partly|(?:text|paper) (?:is|was|appears) "
    r"(?:cut|truncated|incomplete)|truncated)\b",
    re.IGNORECASE,
)


def unsure(verdict: ChecklistVerdict) -> str:
    """Why ``verdict`` may not be the judge's last word ("" when it is sure): it read only
    part of the paper, gave no feedback, or its feedback says it could not tell."""
    if verdict._partial:
        return "read only part of the paper"
    feedback = verdict.feedback.strip()
    if not feedback:
        return "no feedback"
    m = _HEDGE.search(feedback)
    return f"feedback says {m.group(0).lower()!r}" if m else ""


async def assess_item(
    judge: ChecklistJudge,
    item: ChecklistItem,
    *,
    iterations: int = 3,
    single: bool = False,
    policy: str = ADAPTIVE,
) -> ConsensusResult[ChecklistVerdict]:
    """The verdict on one answer under ``policy`` (CHECKLIST_VOTES):

    - ``adaptive``: one vote; a second (a third on disagreement) only where the first failed
      or is :func:`unsure` -- where another vote can change the outcome;
    - ``two``: two votes, a third on disagreement (a majority for every answer);
    - ``single`` (or ``single=True``): the first vote that could be obtained decides.
    """

    async def ask(vote_number: int) -> ChecklistVerdict:
        return await judge.vote(item, vote_number)

    if single or policy == SINGLE:
        return await first_valid(ask, classify, iterations=iterations)
    if policy == TWO:
        return await run_consensus(ask, classify, iterations=iterations)
    if policy != ADAPTIVE:
        raise ValueError(f"policy: {policy!r} is not one of {', '.join(VOTE_POLICIES)}")
    return await confirm_unsure(ask, classify, unsure, iterations=iterations)


# --- offline: evidence checks where the answer points ----------------------------------------

# Words that show the paper has material on each question's topic.
TOPIC_TERMS: dict[int, tuple[str, ...]] = {
    1: ("abstract", "introduction", "contribution"),
    2: ("limitation", "shortcoming", "future work", "does not generalize", "we assume"),
    3: ("theorem", "lemma", "proof", "proposition", "corollary"),
    4: (
        "implementation detail",
        "hyperparameter",
        "learning rate",
        "experimental setup",
        "we train",
        "random seed",
        "reproduc",
    ),
    5: (
        "github.com",
        "code is available",
        "open-source",
        "open source",
        "publicly available",
        "data availability",
        "https://",
    ),
    6: (
        "hyperparameter",
        "learning rate",
        "batch size",
        "optimizer",
        "train/test",
        "split",
        "epochs",
        "experimental setting",
        "baseline",
    ),
    7: (
        "standard deviation",
        "confidence interval",
        "error bar",
        "standard error",
        "±",
        "p-value",
        "std",
        "significan",
    ),
    8: ("gpu", "cpu", "compute", "hours", "a100", "v100", "memory", "cluster"),
    9: ("code of ethics", "ethic"),
    10: ("societal impact", "broader impact", "negative impact", "misuse", "societal"),
    11: ("safeguard", "misuse", "responsible release", "terms of use", "usage guideline"),
    12: (
        "license",
        "licence",
        "cc by",
        "creative commons",
        "mit license",
        "apache",
        "terms of use",
    ),
    13: ("we release", "new dataset", "documentation", "datasheet", "meta-data", "we introduce"),
    14: (
        "crowdsourc",
        "participants",
        "annotator",
        "mechanical turk",
        "human subjects",
        "instructions given",
    ),
    15: (
        "irb",
        "institutional review board",
        "ethics approval",
        "informed consent",
        "human subjects",
    ),
}
# A heading that names the topic outright: a "No"/"NA" answer then contradicts the paper.
TOPIC_HEADINGS: dict[int, tuple[str, ...]] = {
    2: ("limitation",),
    3: ("theorem", "proof"),
    7: ("statistical significance", "error bar"),
    8: ("compute resources", "computational resources", "hardware"),
    10: ("broader impact", "societal impact"),
    12: ("license",),
    14: ("crowdsourcing", "human subjects", "user study"),
    15: ("irb", "ethics approval"),
}
# Questions where material is expected of almost every paper: Yes needs only a justification,
# and NA is never right.
ALWAYS_APPLICABLE = (1, 9)
# The guidelines ask for values here (settings, error bars, compute): a sentence is evidence
# only with a number or ± next to the topic words.
QUANTITATIVE = (4, 6, 7, 8)
# NA says the question does not apply; for these it does whenever the paper reports
# experiments (they have settings, code, error bars, compute, limitations, and use existing
# data or models).
APPLY_WITH_EXPERIMENTS = (2, 4, 5, 6, 7, 8, 12)
EXPERIMENT_HEADINGS = ("experiment", "result", "evaluation", "baseline", "benchmark", "ablation")
NA_MIN_HITS = 5  # topic term occurrences (outside stuffing) that make an NA wrong
MIN_WORDS = 5  # a shorter run of words is a label or a fragment, not a statement

TOPICS = Topics.of(TOPIC_TERMS)
_EXPERIMENT_SENTENCE = re.compile(
    r"\b(?:accuracy|baselines?|datasets?|we train|trained|we evaluate|evaluated|experiments?"
    r"|results?|performance|outperforms?|scores?)\b",
    re.IGNORECASE,
)
_SECTION_REF = re.compile(
    r"\b(Section|Sec\.?|§|Appendix|App\.?)\s*~?\s*:?\s*([A-Z]?\d+(?:\.\d+)*|[A-Z])\b"
)
_OTHER_REF = re.compile(
    r"\b(?:fig(?:ure)?s?|tables?|tab|eq(?:uation)?s?|lines?|algorithms?|theorems?|lemmas?)"
    r"\.?[\s~-]*\d+(?:\.\d+)*",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_YEAR = re.compile(r"^(?:19|20)\d\d$")


def _has_heading(paper_text: str, heading_words: tuple[str, ...]) -> str | None:
    for line in paper_text.splitlines():
        stripped = line.strip()
        if not stripped or len(stripped) > 80:
            continue
        lowered = stripped.lower()
        # A heading is short, maybe numbered ("4 Limitations", "A.2 Broader impact").
        if re.match(r"^(?:[A-Z]|\d+)(?:\.\d+)*\.?\s+\S|^[A-Z][A-Za-z ]+$", stripped) and any(
            w in lowered for w in heading_words
        ):
            return stripped
    return None


def cited_sections(justification: str) -> list[tuple[str, str]]:
    """(as written, reference) pairs: ("Appendix E", "E"), ("Section 3.2", "3.2")."""
    return [
        (f"{m.group(1)} {m.group(2)}", m.group(2)) for m in _SECTION_REF.finditer(justification)
    ]


def section_exists(paper_text: str, ref: str) -> bool:
    """Whether a numbered or lettered heading ``ref`` ("3.2", "E", "B.1") is in the text."""
    return find_section(paper_text, ref) is not None


def unsupported_numbers(justification: str, paper_text: str) -> list[str]:
    """Figures the justification states (not section, figure or table numbers, not years)
    that appear nowhere in the paper: a claim the paper does not back."""
    stripped = _OTHER_REF.sub(" ", _SECTION_REF.sub(" ", justification))
    missing = []
    for number in dict.fromkeys(_NUMBER.findall(stripped)):
        if _YEAR.match(number) or len(number) < 2:
            continue
        if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", paper_text):
            missing.append(number)
    return missing


@lru_cache(maxsize=8)
def read_paper(paper_text: str) -> Reading:
    """The paper split once for its 15 questions (the judge sees one paper at a time)."""
    return Reading.of(paper_text, TOPICS)


def experiments_in(reading: Reading) -> str | None:
    """What shows that the paper reports experiments, or None."""
    for s in reading.sections:
        if any(w in s.title.lower() for w in EXPERIMENT_HEADINGS) and reading.section_has_text(s):
            return f"section '{s.label}'"
    quantitative = [
        s for s in reading.within(None) if _EXPERIMENT_SENTENCE.search(s) and re.search(r"\d", s)
    ]
    if len(quantitative) >= 3:
        return f"{len(quantitative)} sentences with results"
    return None


def evidence_sentences(number: int, sentences: list[str]) -> list[str]:
    """Sentences that say something (five words or more) on the question's topic."""
    terms = TOPIC_TERMS.get(number, ())
    found = []
    for sentence in sentences:
        lowered = sentence.lower()
        if len(words(sentence)) < MIN_WORDS:
            continue
        if not any(t in lowered for t in terms):
            continue
        if number in QUANTITATIVE and not re.search(r"\d|±", sentence):
            continue
        found.append(sentence)
    return found


def _quote(sentence: str, limit: int = 140) -> str:
    return f"“{sentence[:limit]}{'…' if len(sentence) > limit else ''}”"


@dataclass
class OfflineChecklistJudge:
    """Deterministic evidence checks, no model.

    A Yes must be backed where the justification points: the sections it cites (which must
    exist) or names, else the paper as a whole; the evidence is a sentence on the question's
    topic (with figures for settings, error bars and compute), never a run of keywords (see
    :mod:`scoring.checklist.evidence`), and figures the justification states must be in the
    paper. No and NA are wrong when a section of the paper contradicts them, and NA is wrong
    for the experimental questions when the paper reports experiments.
    """

    name: str = "offline"

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict:
        return self.decide(item)

    def decide(self, item: ChecklistItem) -> ChecklistVerdict:
        if item.answer == "Yes":
            return self._yes(item)
        if item.answer == "No":
            return self._no(item)
        return self._na(item)

    def _yes(self, item: ChecklistItem) -> ChecklistVerdict:
        text, justification = item.paper_text, item.justification.strip()
        if not justification:
            return _verdict(False, "Yes needs a justification pointing to the paper.")
        cited = cited_sections(justification)
        missing = [written for written, ref in cited if find_section(text, ref) is None]
        if missing:
            return _verdict(
                False,
                f"The justification cites {', '.join(missing)}, which the paper text does not "
                "contain.",
            )
        topic = _named(item)
        if item.number in ALWAYS_APPLICABLE:
            return _verdict(True, f"{topic} applies to every paper; the answer is justified.")
        numbers = unsupported_numbers(justification, text)
        if numbers:
            return _verdict(
                False,
                f"The justification states {', '.join(numbers)}, which the paper text does not "
                "contain.",
            )
        reading = read_paper(text)
        pointed = [s for _, ref in cited if (s := find_section(text, ref)) is not None]
        pointed += [s for s in named_sections(text, justification) if s not in pointed]
        where = ", ".join(f"section '{s.label}'" for s in pointed) or "the paper"
        region = pointed or None
        heading = next(
            (
                s
                for s in (pointed or reading.sections)
                if any(w in s.title.lower() for w in TOPIC_HEADINGS.get(item.number, ()))
                and reading.section_has_text(s)
            ),
            None,
        )
        found = evidence_sentences(item.number, reading.within(region))
        if heading is not None:
            return _verdict(True, f"The paper has a section for {topic}: '{heading.label}'.")
        if found:
            return _verdict(True, f"Evidence for {topic} in {where}: {_quote(found[0])}")
        stuffed = (
            f" {reading.stuffed} keyword-stuffed passage(s) were not counted."
            if reading.stuffed
            else ""
        )
        values = " with figures" if item.number in QUANTITATIVE else ""
        return _verdict(
            False,
            f"No evidence for {topic}{values} in {where} (looked for: "
            f"{', '.join(TOPIC_TERMS.get(item.number, ())[:5])}).{stuffed}",
        )

    def _no(self, item: ChecklistItem) -> ChecklistVerdict:
        if not item.justification.strip():
            return _verdict(False, "No needs a justification saying what is missing.")
        heading = _has_heading(item.paper_text, TOPIC_HEADINGS.get(item.number, ()))
        if heading:
            return _verdict(False, f"Answered No, but the paper has a section '{heading}'.")
        return _verdict(True, f"No dedicated section for {_named(item)} found; No is consistent.")

    def _na(self, item: ChecklistItem) -> ChecklistVerdict:
        topic = _named(item)
        if item.number in ALWAYS_APPLICABLE:
            return _verdict(False, f"{topic} applies to every paper; NA is not valid.")
        reading = read_paper(item.paper_text)
        if item.number in APPLY_WITH_EXPERIMENTS:
            experiments = experiments_in(reading)
            if experiments:
                return _verdict(
                    False,
                    f"Answered NA, but the paper reports experiments ({experiments}), so "
                    f"{topic} applies.",
                )
        heading = _has_heading(item.paper_text, TOPIC_HEADINGS.get(item.number, ()))
        kept = " ".join(reading.within(None)).lower()
        found = [t for t in TOPIC_TERMS.get(item.number, ()) if t in kept]
        if heading or sum(kept.count(t) for t in found) >= NA_MIN_HITS:
            evidence = f"section '{heading}'" if heading else f"terms {', '.join(found[:4])}"
            return _verdict(
                False, f"Answered NA, but the paper has material for {topic} ({evidence})."
            )
        return _verdict(True, f"Little material for {topic}; NA is plausible.")


def _named(item: ChecklistItem) -> str:
    """The question as feedback names it: its number and its title as papers print it (what
    every page shows), not the assistant's short name that the judge is asked with."""
    return label(item.number) if item.number in QUESTION_TITLES else item.title


def _verdict(correct: bool, feedback: str) -> ChecklistVerdict:
    return ChecklistVerdict(correct=correct, feedback=feedback)


# --- recorded ---------------------------------------------------------------------------------


@dataclass
class RecordedChecklistJudge:
    """Assessments made elsewhere: ``verdicts[(paper_kind, number)] = (c, review)``."""

    verdicts: Mapping[tuple[str, int], tuple[int, str]]
    name: str = "recorded"

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict:
        recorded = self.verdicts.get((item.paper_kind, item.number))
        if recorded is None:
            raise VoteFailed(f"no recorded assessment for {item.paper_kind} Q{item.number}")
        c, review = recorded
        return ChecklistVerdict(correct=bool(c), feedback=review[:2000])
