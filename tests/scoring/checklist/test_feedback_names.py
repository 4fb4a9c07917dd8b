"""The offline judge's feedback names each question as every page does (its number and its
title as papers print it), never by the assistant's short name the judge is asked with: "Risks"
for question 15 (IRB approvals) or "Error bars" for question 7 read as other questions (issue 37
item 8)."""

from __future__ import annotations

import pytest

from scoring.checklist.judges import ChecklistItem, OfflineChecklistJudge
from tests.scoring.checklist.test_judges import PAPER

SHORT_NAMES = {1: "Claims", 7: "Error bars", 12: "Credits", 15: "Risks"}


@pytest.mark.parametrize(
    ("number", "answer", "printed"),
    [
        (1, "NA", "Question 1 (Claims) applies to every paper"),
        (7, "Yes", "Question 7 (Experiment Statistical Significance)"),
        (12, "No", "Question 12 (Licenses for Existing Assets)"),
        (15, "NA", "Question 15 (Institutional Review Board (IRB) Approvals"),
    ],
)
def test_feedback_names_the_printed_question(number: int, answer: str, printed: str) -> None:
    short = SHORT_NAMES[number]
    item = ChecklistItem(
        "G", number, short, "Question?", "Guidelines.", answer, "See the paper.", PAPER
    )
    feedback = OfflineChecklistJudge().decide(item).feedback
    assert printed in feedback, feedback
    said = feedback.split("“")[0]  # what the judge says, before any quote from the paper
    if short != "Claims":
        assert short.lower() not in said.lower(), feedback
