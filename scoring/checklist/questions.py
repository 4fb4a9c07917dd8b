"""The 15 NeurIPS 2024 checklist questions by number and title (titles as printed in papers)."""

from __future__ import annotations

QUESTION_TITLES: dict[int, str] = {
    1: "Claims",
    2: "Limitations",
    3: "Theory Assumptions and Proofs",
    4: "Experimental Result Reproducibility",
    5: "Open Access to Data and Code",
    6: "Experimental Setting/Details",
    7: "Experiment Statistical Significance",
    8: "Experiments Compute Resources",
    9: "Code of Ethics",
    10: "Broader Impacts",
    11: "Safeguards",
    12: "Licenses for Existing Assets",
    13: "New Assets",
    14: "Crowdsourcing and Research with Human Subjects",
    15: "Institutional Review Board (IRB) Approvals or Equivalent for Research with Human Subjects",
}
QUESTION_NUMBERS: tuple[int, ...] = tuple(sorted(QUESTION_TITLES))
N_QUESTIONS = len(QUESTION_NUMBERS)


def label(number: int) -> str:
    return f"Question {number} ({QUESTION_TITLES.get(number, '?')})"
