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
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.checklist.normalize import normalize_answer
from scoring.checklist.questions import QUESTION_NUMBERS
from scoring.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_sums_interval


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


# S is ranked on the board with a bootstrap interval over questions; the seed is fixed so that
# the same verdicts always give the same interval.
CI_METRIC = "s"
CI_SEED = 0


def s_from_sums(sums: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    c_g, c_a, c_t, counted, agree, n = (sums[:, i] for i in range(6))
    r = np.ones_like(counted)
    np.divide(agree, counted, out=r, where=counted > 0)
    return (c_g / n) * (c_a / n) * (1.0 - r) * (c_t / n)


def s_units(
    genuine: PaperAssessment,
    adversarial: PaperAssessment | None = None,
    truth: PaperAssessment | None = None,
    numbers: tuple[int, ...] = QUESTION_NUMBERS,
) -> npt.NDArray[np.float64]:
    """One row per question of ``numbers``: the per-question quantities S is a function of
    (``s_from_sums`` of their column sums): c_G, c_A, c_T, counted in R, agreeing in R, 1."""
    if (adversarial is None) != (truth is None):
        raise ValueError("A and T come together: give both or neither")
    rows = []
    for n in numbers:
        if adversarial is None or truth is None:
            rows.append([genuine.c(n), 0, 0, 0, 0, 1])
            continue
        counted = truth.answer(n) != "TODO"
        g = 1 if adversarial.answer(n) == truth.answer(n) else 0
        agree = counted and adversarial.c(n) == g
        rows.append([genuine.c(n), adversarial.c(n), truth.c(n), int(counted), int(agree), 1])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 6)


def s_interval(
    genuine: PaperAssessment,
    adversarial: PaperAssessment | None = None,
    truth: PaperAssessment | None = None,
    numbers: tuple[int, ...] = QUESTION_NUMBERS,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = CI_SEED,
) -> dict[str, Any] | None:
    """Bootstrap interval of S, resampling the checklist questions with replacement.

    A resample is a multiset of question numbers; C, R and S are computed on it exactly as
    :func:`checklist_scores` computes them on ``numbers`` (a question drawn twice counts
    twice), from per-question sums, so the resamples are summed with numpy. A G-only entry's
    S is 0 on every resample. Returns ``{"metric", "low", "high", "level", "resamples",
    "seed"}``, or None without questions.
    """
    rows = s_units(genuine, adversarial, truth, numbers)
    interval = bootstrap_sums_interval(
        rows,
        s_from_sums,
        resamples=resamples,
        level=level,
        seed=seed,
    )
    return None if interval is None else {"metric": CI_METRIC, **interval.as_dict()}
