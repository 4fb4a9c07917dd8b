"""What the vote policies cost and how often they agree, from recorded assessments.

An assessment recorded under the ``two`` policy holds every vote asked (two, a third on
disagreement). The ``adaptive`` policy would have asked the same first vote (same vote number,
same seed, same cached answer) and stopped there when it was valid and sure; otherwise it asks
what ``two`` asked. So both policies' calls and outcomes follow from the record alone, with no
judge asked again. An assessment that holds one vote was recorded by a one-vote policy: what a
second vote would have said is unknown, and it is counted apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.checklist.judges import ChecklistVerdict, classify, unsure
from scoring.judges.consensus import Vote, decide


@dataclass(frozen=True)
class PolicyComparison:
    answers: int = 0  # assessments with every vote recorded (two or more)
    votes_two: int = 0  # votes the ``two`` policy asked for them
    votes_adaptive: int = 0  # votes the ``adaptive`` policy would have asked
    agree: int = 0  # answers where both policies reach the same outcome
    second_votes: int = 0  # answers where ``adaptive`` would have asked a second vote
    one_vote: int = 0  # assessments recorded with one vote (not comparable)

    @property
    def agreement(self) -> float | None:
        return self.agree / self.answers if self.answers else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "votes_two": self.votes_two,
            "votes_adaptive": self.votes_adaptive,
            "agree": self.agree,
            "agreement": self.agreement,
            "second_votes": self.second_votes,
            "one_vote_records": self.one_vote,
        }


def _vote(number: int, stored: Mapping[str, Any]) -> Vote[ChecklistVerdict]:
    correct = stored.get("correct")
    if correct is None:
        return Vote(number, None, None, str(stored.get("error") or "failed"))
    verdict = ChecklistVerdict(correct=bool(correct), feedback=str(stored.get("feedback") or ""))
    return Vote(number, verdict, classify(verdict))


def _sure(vote: Vote[ChecklistVerdict], stored: Mapping[str, Any]) -> bool:
    if not vote.ok or vote.verdict is None:
        return False
    # The reason recorded when the vote was asked (a paper read in part leaves no trace in
    # the feedback), else what the feedback says now.
    return not (stored.get("unsure") or unsure(vote.verdict))


def compare_policies(recorded: Iterable[Sequence[Mapping[str, Any]]]) -> PolicyComparison:
    """Both policies over assessments given by their recorded votes (in vote order)."""
    answers = votes_two = votes_adaptive = agree = second = one_vote = 0
    for stored_votes in recorded:
        if len(stored_votes) < 2:
            one_vote += 1
            continue
        votes = [_vote(i + 1, v) for i, v in enumerate(stored_votes)]
        both = decide(votes)
        answers += 1
        votes_two += len(votes)
        if _sure(votes[0], stored_votes[0]):
            votes_adaptive += 1
            agree += int(votes[0].label == both.label)
        else:
            votes_adaptive += len(votes)
            second += 1
            agree += 1  # the same votes asked, the same outcome
    return PolicyComparison(answers, votes_two, votes_adaptive, agree, second, one_vote)
