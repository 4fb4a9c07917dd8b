"""C, R and S of the checklist challenge (full precision; round only for display).

- C = Σ c_i / n over all n questions of a paper; a TODO answer counts 0.
- R over the questions whose T answer is not TODO: g_i = 1 when A's answer equals T's
  (after normalization), else 0; R is the share of those questions where c_i, the
  assessment of A's answer, equals g_i.
- S = C_G · C_A · (1 - R) · C_T. A G-only entry has C_A = 0, C_T = 0, R = 1, so S = 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scoring.checklist.normalize import normalize_answer
from scoring.checklist.questions import QUESTION_NUMBERS


@dataclass(frozen=True)
class PaperAssessment:
    """Per-question answers (any accepted spelling) and correctness c ∈ {0, 1}.

    A question missing from ``answers`` is TODO; TODO answers count c = 0 whatever is given.
    """

    answers: Mapping[int, str]
    correct: Mapping[int, int]

    def answer(self, number: int) -> str:
        return normalize_answer(self.answers.get(number))

    def c(self, number: int) -> int:
        if self.answer(number) == "TODO":
            return 0
        value = self.correct.get(number)
        if value not in (0, 1):
            raise ValueError(f"question {number}: c must be 0 or 1, got {value!r}")
        return int(value)


@dataclass(frozen=True)
class ChecklistScores:
    c_g: float
    c_a: float
    c_t: float
    r: float
    s: float

    def display(self) -> dict[str, str]:
        return {k: f"{getattr(self, k):.2f}" for k in ("c_g", "c_a", "c_t", "r", "s")}


def correctness(paper: PaperAssessment, numbers: tuple[int, ...] = QUESTION_NUMBERS) -> float:
    return sum(paper.c(n) for n in numbers) / len(numbers)


def robustness(
    adversarial: PaperAssessment,
    truth: PaperAssessment,
    numbers: tuple[int, ...] = QUESTION_NUMBERS,
) -> float:
    """R; 1.0 (the worst case, so S = 0) when every T answer is TODO."""
    counted = [n for n in numbers if truth.answer(n) != "TODO"]
    if not counted:
        return 1.0
    agree = 0
    for n in counted:
        g = 1 if adversarial.answer(n) == truth.answer(n) else 0
        agree += 1 if adversarial.c(n) == g else 0
    return agree / len(counted)


def checklist_scores(
    genuine: PaperAssessment,
    adversarial: PaperAssessment | None = None,
    truth: PaperAssessment | None = None,
    numbers: tuple[int, ...] = QUESTION_NUMBERS,
) -> ChecklistScores:
    if (adversarial is None) != (truth is None):
        raise ValueError("A and T come together: give both or neither")
    c_g = correctness(genuine, numbers)
    if adversarial is None or truth is None:
        return ChecklistScores(c_g=c_g, c_a=0.0, c_t=0.0, r=1.0, s=0.0)
    c_a = correctness(adversarial, numbers)
    c_t = correctness(truth, numbers)
    r = robustness(adversarial, truth, numbers)
    return ChecklistScores(c_g=c_g, c_a=c_a, c_t=c_t, r=r, s=c_g * c_a * (1.0 - r) * c_t)
