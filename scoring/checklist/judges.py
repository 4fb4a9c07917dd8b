"""Checklist judges: each decides whether one checklist answer is correct (c = 1) or not.

All judges answer one vote at a time (``vote(item, vote_number)``) so that every judge goes
through the same consensus (:func:`assess_item`): two votes, a third only on disagreement.

- :class:`OfflineChecklistJudge`: deterministic evidence checks, no network (the default).
- :class:`RecordedChecklistJudge`: assessments already made (the challenge's CSV files).
- ``scoring.checklist.openai_judge.OpenAIChecklistJudge``: an LLM through the shared layer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, Field

from scoring.judges.consensus import ConsensusResult, VoteFailed, run_consensus


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
    # No maxLength: strict structured outputs reject it; stored feedback is cut instead.
    feedback: str = Field(default="", description="Short feedback for the authors.")


class ChecklistJudge(Protocol):
    @property
    def name(self) -> str: ...

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict: ...


def classify(verdict: ChecklistVerdict) -> str:
    return "1" if verdict.correct else "0"


async def assess_item(
    judge: ChecklistJudge, item: ChecklistItem, *, iterations: int = 3
) -> ConsensusResult[ChecklistVerdict]:
    async def ask(vote_number: int) -> ChecklistVerdict:
        return await judge.vote(item, vote_number)

    return await run_consensus(ask, classify, iterations=iterations)


# --- offline: deterministic evidence checks -------------------------------------------------

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
# Questions where material is expected of almost every paper: Yes needs only a justification.
ALWAYS_APPLICABLE = (1, 9)
MIN_HITS = 2

_SECTION_REF = re.compile(
    r"\b(Section|Sec\.?|§|Appendix|App\.?)\s*~?\s*:?\s*([A-Z]?\d+(?:\.\d+)*|[A-Z])\b"
)


def _count_hits(text: str, terms: tuple[str, ...]) -> tuple[int, list[str]]:
    found = [t for t in terms if t in text]
    hits = sum(text.count(t) for t in found)
    return hits, found


def _has_heading(paper_text: str, words: tuple[str, ...]) -> str | None:
    for line in paper_text.splitlines():
        stripped = line.strip()
        if not stripped or len(stripped) > 80:
            continue
        lowered = stripped.lower()
        # A heading is short, maybe numbered ("4 Limitations", "A.2 Broader impact").
        if re.match(r"^(?:[A-Z]|\d+)(?:\.\d+)*\.?\s+\S|^[A-Z][A-Za-z ]+$", stripped) and any(
            w in lowered for w in words
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
    pattern = rf"(?m)^\s*(?:Appendix\s+|Section\s+)?{re.escape(ref)}\.?\s+[A-Z][^\n]{{0,120}}$"
    return re.search(pattern, paper_text) is not None


@dataclass
class OfflineChecklistJudge:
    """Deterministic evidence checks, no model: is there material on the question's topic,
    does a cited section exist, does a No or NA answer contradict a section of the paper."""

    name: str = "offline"

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict:
        return self.decide(item)

    def decide(self, item: ChecklistItem) -> ChecklistVerdict:
        text = item.paper_text
        lowered = text.lower()
        terms = TOPIC_TERMS.get(item.number, ())
        hits, found = _count_hits(lowered, terms)
        heading = _has_heading(text, TOPIC_HEADINGS.get(item.number, ()))
        justification = item.justification.strip()
        missing = [
            written
            for written, ref in cited_sections(justification)
            if not section_exists(text, ref)
        ]

        if item.answer == "Yes":
            if not justification:
                return ChecklistVerdict(
                    correct=False, feedback="Yes needs a justification pointing to the paper."
                )
            if missing:
                return ChecklistVerdict(
                    correct=False,
                    feedback=f"The justification cites {', '.join(missing)}, which the paper "
                    "text does not contain.",
                )
            if item.number in ALWAYS_APPLICABLE or hits >= MIN_HITS or heading:
                where = f" (section '{heading}')" if heading else ""
                return ChecklistVerdict(
                    correct=True,
                    feedback=f"The paper has material on {item.title.lower()}{where}: "
                    f"{', '.join(found[:4]) or 'a justification'}.",
                )
            return ChecklistVerdict(
                correct=False,
                feedback=f"No material on {item.title.lower()} found in the paper text "
                f"(looked for: {', '.join(terms[:5])}).",
            )
        if item.answer == "No":
            if not justification:
                return ChecklistVerdict(
                    correct=False, feedback="No needs a justification saying what is missing."
                )
            if heading:
                return ChecklistVerdict(
                    correct=False,
                    feedback=f"Answered No, but the paper has a section '{heading}'.",
                )
            return ChecklistVerdict(
                correct=True,
                feedback=f"No dedicated section on {item.title.lower()} found; No is consistent.",
            )
        # NA: the question must not apply to the paper.
        if heading or (item.number not in ALWAYS_APPLICABLE and hits >= 2 * MIN_HITS + 1):
            evidence = f"section '{heading}'" if heading else f"terms {', '.join(found[:4])}"
            return ChecklistVerdict(
                correct=False,
                feedback=f"Answered NA, but the paper has material on {item.title.lower()} "
                f"({evidence}).",
            )
        if item.number in ALWAYS_APPLICABLE:
            return ChecklistVerdict(
                correct=False, feedback=f"{item.title} applies to every paper; NA is not valid."
            )
        return ChecklistVerdict(
            correct=True, feedback=f"Little material on {item.title.lower()}; NA is plausible."
        )


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
