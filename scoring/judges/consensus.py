"""Majority voting with early exit, shared by every LLM-judged benchmark.

The first two votes are asked concurrently; the third only when they disagree. Votes that
could not be obtained (errors after retries, verdicts that stayed invalid) are recorded as
failed and never count towards an outcome. A judge that is down altogether
(:class:`~scoring.judges.failures.JudgeUnavailable`) is not a failed vote: it propagates, and
the votes still being asked are cancelled.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """``asyncio.gather``, except that the first exception cancels the others.

    A plain gather leaves the siblings of a failed awaitable running unseen; when the judge is
    down (``JudgeUnavailable``) they would go on waiting out the outage for a run that paused.
    """
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class VoteFailed(Exception):
    """A vote could not be obtained; ``reason`` says why (recorded, never a verdict)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Vote(Generic[T]):
    number: int
    verdict: T | None
    label: str | None  # the class the verdict falls in; None for a failed vote
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.label is not None


@dataclass(frozen=True)
class ConsensusResult(Generic[T]):
    """``verdict`` is ``None`` when not enough valid votes could be obtained."""

    verdict: T | None
    label: str | None
    votes: Sequence[Vote[T]] = field(default_factory=tuple)
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict is None


TieBreak = Callable[[Sequence[Vote[T]]], Vote[T]]


def first_vote(votes: Sequence[Vote[T]]) -> Vote[T]:
    return votes[0]


def decide(votes: Sequence[Vote[T]], *, tie_break: TieBreak[T] = first_vote) -> ConsensusResult[T]:
    """Decide from the votes asked so far (pure; the asking is :func:`run_consensus`)."""
    valid = [v for v in votes if v.ok]
    failed = len(votes) - len(valid)
    if not valid:
        return ConsensusResult(None, None, tuple(votes), reason="no valid vote")
    if len(votes) == 1:
        return ConsensusResult(valid[0].verdict, valid[0].label, tuple(votes), reason="single vote")
    counts = Counter(v.label for v in valid)
    label, n = counts.most_common(1)[0]
    if n >= 2:
        winner = next(v for v in valid if v.label == label)
        return ConsensusResult(
            winner.verdict, label, tuple(votes), reason=f"majority {n}/{len(votes)}"
        )
    if failed:
        # One valid vote left against a failed one, or two valid votes that disagree beside a
        # failed one: no majority can be formed, so the item is recorded as failed.
        return ConsensusResult(
            None, None, tuple(votes), reason=f"no majority ({failed} failed vote(s))"
        )
    chosen = tie_break(valid)
    return ConsensusResult(chosen.verdict, chosen.label, tuple(votes), reason="split; tie-break")


async def _ask_one(
    number: int, ask: Callable[[int], Awaitable[T]], classify: Callable[[T], str]
) -> Vote[T]:
    try:
        verdict = await ask(number)
    except VoteFailed as exc:
        # Only a vote that could not be obtained; JudgeUnavailable is not one and propagates.
        return Vote(number, None, None, exc.reason)
    return Vote(number, verdict, classify(verdict))


async def first_valid(
    ask: Callable[[int], Awaitable[T]],
    classify: Callable[[T], str],
    *,
    iterations: int = 3,
) -> ConsensusResult[T]:
    """The first vote that could be obtained decides; the next is asked only when it failed.

    One call per item where the judge answers validly (as a single-judge challenge does),
    against two to three for :func:`run_consensus`; up to ``iterations`` asks in all.
    """
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    votes: list[Vote[T]] = []
    for number in range(1, iterations + 1):
        vote = await _ask_one(number, ask, classify)
        votes.append(vote)
        if vote.ok:
            return ConsensusResult(
                vote.verdict, vote.label, tuple(votes), reason=f"first valid vote ({number})"
            )
    return ConsensusResult(None, None, tuple(votes), reason="no valid vote")


async def confirm_unsure(
    ask: Callable[[int], Awaitable[T]],
    classify: Callable[[T], str],
    unsure: Callable[[T], str],
    *,
    iterations: int = 3,
    tie_break: TieBreak[T] = first_vote,
) -> ConsensusResult[T]:
    """One vote, and more only where they can change the outcome.

    A first vote that is valid and sure (``unsure(verdict)`` is empty) decides alone, as a
    single-judge challenge does. A first vote that failed or is unsure is followed as in
    :func:`run_consensus`: a second vote, a third while no majority of ``iterations`` holds.
    """
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    first = await _ask_one(1, ask, classify)
    if first.ok and first.verdict is not None:
        doubt = unsure(first.verdict)
        if not doubt:
            return ConsensusResult(first.verdict, first.label, (first,), reason="one sure vote")
    votes = [first]
    needed = iterations // 2 + 1
    while len(votes) < iterations:
        counts = Counter(v.label for v in votes if v.ok)
        if len(votes) >= 2 and counts and counts.most_common(1)[0][1] >= needed:
            break
        votes.append(await _ask_one(len(votes) + 1, ask, classify))
    return decide(votes, tie_break=tie_break)


async def run_consensus(
    ask: Callable[[int], Awaitable[T]],
    classify: Callable[[T], str],
    *,
    iterations: int = 3,
    tie_break: TieBreak[T] = first_vote,
) -> ConsensusResult[T]:
    """Ask ``ask(vote_number)`` up to ``iterations`` times (vote numbers start at 1).

    ``ask`` raises :class:`VoteFailed` for a vote it could not obtain. With the default three
    iterations: votes 1 and 2 run concurrently; when both are valid and fall in the same class
    the result is final; otherwise vote 3 is asked. More iterations continue one at a time
    until some class holds a strict majority of ``iterations``.
    """
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    first = min(2, iterations)
    votes = await gather_all(*(_ask_one(n, ask, classify) for n in range(1, first + 1)))
    needed = iterations // 2 + 1
    while len(votes) < iterations:
        counts = Counter(v.label for v in votes if v.ok)
        if counts and counts.most_common(1)[0][1] >= needed:
            break
        votes.append(await _ask_one(len(votes) + 1, ask, classify))
    return decide(votes, tie_break=tie_break)
