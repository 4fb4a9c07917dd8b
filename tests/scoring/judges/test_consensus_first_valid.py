"""``first_valid``: one call per item while the judge answers, the next vote only on failure."""

from __future__ import annotations

import asyncio

from scoring.judges.consensus import VoteFailed, first_valid


def test_the_first_valid_vote_decides_and_a_failed_one_asks_the_next() -> None:
    asked: list[int] = []

    async def ask(n: int) -> str:
        asked.append(n)
        if n == 1 and failing:
            raise VoteFailed("[invalid] invalid answer twice")
        return "yes" if n < 3 else "no"

    failing = False
    result = asyncio.run(first_valid(ask, str, iterations=3))
    assert (result.label, asked, result.reason) == ("yes", [1], "first valid vote (1)")

    asked.clear()
    failing = True
    result = asyncio.run(first_valid(ask, str, iterations=3))
    assert (result.label, asked) == ("yes", [1, 2])
    assert [v.ok for v in result.votes] == [False, True]


def test_no_valid_vote_fails_the_item_after_the_iterations() -> None:
    async def ask(n: int) -> str:
        raise VoteFailed(f"[transient] down {n}")

    result = asyncio.run(first_valid(ask, str, iterations=2))
    assert result.failed and len(result.votes) == 2 and result.reason == "no valid vote"
