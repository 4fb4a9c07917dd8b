"""How many votes a checklist answer gets (issue 24, item 6).

The adaptive policy asks a second vote only where it can change the outcome: the first vote
failed, or it was unsure (it read part of the paper, gave no feedback, or said it could not
tell). ``compare_policies`` gives both policies' votes and agreement from recorded votes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from scoring.checklist.judges import ChecklistItem, ChecklistVerdict, assess_item, unsure
from scoring.checklist.votes import compare_policies
from scoring.judges.consensus import VoteFailed


def _item() -> ChecklistItem:
    return ChecklistItem("G", 7, "Error bars", "q", "g", "Yes", "See Table 2.", "paper")


@dataclass
class Scripted:
    """Answers the votes it is given in order (a string is a failed vote's reason)."""

    answers: list[ChecklistVerdict | str]
    asked: list[int] = field(default_factory=list)
    name: str = "scripted"

    async def vote(self, item: ChecklistItem, vote_number: int) -> ChecklistVerdict:
        self.asked.append(vote_number)
        answer = self.answers[vote_number - 1]
        if isinstance(answer, str):
            raise VoteFailed(answer)
        return answer


SURE_YES = ChecklistVerdict(correct=True, feedback="Table 2 reports standard deviations.")
SURE_NO = ChecklistVerdict(correct=False, feedback="No error bars are reported anywhere.")
HEDGED = ChecklistVerdict(correct=True, feedback="It is unclear whether Table 2 has error bars.")


def _partial() -> ChecklistVerdict:
    verdict = ChecklistVerdict(correct=False, feedback="Nothing on error bars in the text.")
    verdict._partial = True
    return verdict


def test_a_sure_first_vote_decides_alone() -> None:
    judge = Scripted([SURE_YES, SURE_NO, SURE_NO])
    result = asyncio.run(assess_item(judge, _item()))
    assert judge.asked == [1] and result.verdict == SURE_YES


@pytest.mark.parametrize(
    ("first", "why"),
    [
        (HEDGED, "feedback says 'unclear'"),
        (ChecklistVerdict(correct=True, feedback=" "), "no feedback"),
        (_partial(), "read only part of the paper"),
    ],
)
def test_an_unsure_first_vote_is_checked_and_can_be_overturned(
    first: ChecklistVerdict, why: str
) -> None:
    assert unsure(first) == why
    judge = Scripted([first, SURE_NO, SURE_NO])
    result = asyncio.run(assess_item(judge, _item()))
    if first.correct:
        # Disagreement: a third vote decides, against the unsure first one.
        assert judge.asked == [1, 2, 3] and result.verdict == SURE_NO
    else:
        assert judge.asked == [1, 2] and result.label == "0"


def test_a_failed_first_vote_is_asked_again_as_under_the_majority() -> None:
    judge = Scripted(["[invalid] invalid answer twice", SURE_YES, SURE_YES])
    result = asyncio.run(assess_item(judge, _item()))
    # One valid vote beside a failed one is no majority: the third decides.
    assert judge.asked == [1, 2, 3] and result.verdict == SURE_YES


def test_the_two_policy_always_asks_two() -> None:
    judge = Scripted([SURE_YES, SURE_YES, SURE_YES])
    asyncio.run(assess_item(judge, _item(), policy="two"))
    assert sorted(judge.asked) == [1, 2]
    with pytest.raises(ValueError, match="policy: 'three'"):
        asyncio.run(assess_item(judge, _item(), policy="three"))


def _stored(v: ChecklistVerdict | None, error: str = "") -> dict[str, object]:
    if v is None:
        return {"correct": None, "feedback": "", "error": error}
    return {"correct": v.correct, "feedback": v.feedback, "error": ""}


def test_compare_policies_from_recorded_votes() -> None:
    recorded = [
        [_stored(SURE_YES), _stored(SURE_YES)],  # sure, agreeing: 1 vote instead of 2
        [_stored(SURE_YES), _stored(SURE_NO), _stored(SURE_NO)],  # sure but outvoted
        [_stored(HEDGED), _stored(SURE_NO), _stored(SURE_NO)],  # unsure: same 3 votes
        [_stored(None, "[transient] x"), _stored(SURE_NO), _stored(SURE_NO)],  # failed first
        [{**_stored(SURE_NO), "unsure": "read only part of the paper"}, _stored(SURE_NO)],
        [_stored(SURE_YES)],  # recorded by a one-vote policy: not comparable
    ]
    figures = compare_policies(recorded)
    assert figures.answers == 5 and figures.one_vote == 1
    assert figures.votes_two == 2 + 3 + 3 + 3 + 2
    assert figures.votes_adaptive == 1 + 1 + 3 + 3 + 2
    assert figures.second_votes == 3
    assert figures.agree == 4 and figures.agreement == pytest.approx(0.8)
