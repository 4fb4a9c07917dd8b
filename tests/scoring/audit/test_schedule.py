"""The concurrent schedule gives the sequential result, votes and questions (property test)."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.audit.matching import RepoMatch, match_repo
from scoring.audit.schedule import Prefilter, match_repo_concurrent, pool_prefix
from scoring.audit.types import MATCH, NONE, ScanItem, TruthItem, TruthOutcome
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import CallRecord, local_call
from tests.scoring.audit.helpers import scans, truths, verdict


class RandomJudge:
    """Answers are a fixed function of (truth, batch, vote): the same judge for both schedules.

    Like every real audit judge, a match or partial names a finding of the batch. Each call
    sleeps a little, so concurrent calls interleave in many orders.
    """

    name = "random"
    model = "random"

    def __init__(self, seed: int, p_match: float, p_partial: float, p_fail: float) -> None:
        self.seed = seed
        self.p = (p_match, p_partial, p_fail)
        self.asked: list[tuple[Any, tuple[int, ...], int]] = []
        self.records: list[CallRecord] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def _draw(self, truth: Any, batch: tuple[int, ...], vote: int) -> random.Random:
        digest = hashlib.sha256(f"{self.seed}|{truth}|{batch}|{vote}".encode()).hexdigest()
        return random.Random(int(digest[:16], 16))

    async def judge(self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int) -> Any:
        indices = tuple(s.index for s in batch)
        rng = self._draw(truth.key, indices, vote_number)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(rng.random() * 0.002)
        finally:
            self.in_flight -= 1
        p_match, p_partial, p_fail = self.p

        def compute() -> Any:
            self.asked.append((truth.key, indices, vote_number))
            roll = rng.random()
            if roll < p_fail:
                raise VoteFailed("scripted failure")
            if roll < p_fail + p_match:
                return verdict("match", rng.choice(indices))
            if roll < p_fail + p_match + p_partial:
                return verdict("partial", rng.choice(indices))
            return verdict("none")

        return await local_call(
            judge_name=self.name,
            model=self.model,
            prompt_version="t",
            prompt_text=f"{truth.key}{indices}",
            vote_number=vote_number,
            compute=compute,
            schema=type(verdict("none")),
            record=self.records.append,
        )


def _shape(result: RepoMatch) -> dict[str, Any]:
    return {
        "outcomes": [asdict(o) for o in result.outcomes],
        "final": result.final,
        "false_positives": result.false_positives,
        "notes": result.notes,
        "pending": result.pending,
    }


def _ledger(records: list[CallRecord]) -> Counter[tuple[str, int, int, str, str]]:
    return Counter((r.prompt_hash, r.vote_number, r.attempt, r.status, r.error) for r in records)


def _both(
    make: Any, ts: list[TruthItem], ss: list[ScanItem], **kwargs: Any
) -> tuple[Any, Any, Any, Any]:
    seen: dict[str, list[TruthOutcome]] = {"seq": [], "conc": []}

    def saver(name: str) -> Any:
        async def on_outcome(o: TruthOutcome) -> None:
            seen[name].append(o)

        return on_outcome

    a, b = make(), make()
    seq = asyncio.run(match_repo(a, ts, ss, on_outcome=saver("seq"), **kwargs))
    conc = asyncio.run(match_repo_concurrent(b, ts, ss, on_outcome=saver("conc"), **kwargs))
    assert [asdict(o) for o in seen["seq"]] == [asdict(o) for o in seen["conc"]]
    return seq, conc, a, b


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**9),
    n_truths=st.integers(0, 14),
    n_scans=st.integers(0, 40),
    batch_size=st.integers(1, 12),
    iterations=st.integers(1, 4),
    p_match=st.sampled_from([0.0, 0.05, 0.2, 0.5]),
    p_partial=st.sampled_from([0.0, 0.1, 0.3]),
    p_fail=st.sampled_from([0.0, 0.0, 0.02, 0.1]),
    n_done=st.integers(0, 5),
    prefilter=st.sampled_from([None, 1, 3, 10]),
)
def test_concurrent_schedule_equals_sequential(
    seed: int,
    n_truths: int,
    n_scans: int,
    batch_size: int,
    iterations: int,
    p_match: float,
    p_partial: float,
    p_fail: float,
    n_done: int,
    prefilter: int | None,
) -> None:
    ts, ss = truths(n_truths), scans(n_scans)
    rng = random.Random(seed)
    # Outcomes of an earlier attempt (a prefix in truth order, as the runs store them).
    done = []
    taken: set[int] = set()
    for t in ts[: min(n_done, n_truths)]:
        free = [s.index for s in ss if s.index not in taken]
        if free and rng.random() < 0.4:
            index = rng.choice(free)
            taken.add(index)
            done.append(TruthOutcome(truth_key=t.key, outcome=MATCH, scan_index=index))
        else:
            done.append(TruthOutcome(truth_key=t.key, outcome=NONE))
    order = None
    if prefilter is not None:
        ranking = {t.key: rng.sample([s.index for s in ss], len(ss)) for t in ts}
        order = Prefilter(prefilter, ranking)

    seq, conc, a, b = _both(
        lambda: RandomJudge(seed, p_match, p_partial, p_fail),
        ts,
        ss,
        batch_size=batch_size,
        iterations=iterations,
        done=done,
        order=order,
    )
    assert _shape(seq) == _shape(conc)
    if not seq.pending:
        # Exactly the same questions, each asked once, and the same ledger.
        assert Counter(a.asked) == Counter(b.asked)
        assert _ledger(a.records) == _ledger(b.records)
    else:
        # Behind a judge failure the concurrent schedule may have asked ahead (cached for
        # the resume); everything the sequential run asked it asked too.
        assert not (Counter(a.asked) - Counter(b.asked))


def test_chain_is_truths_plus_batches_not_their_product() -> None:
    """30 truths over 10 batches that never match: the sequential run takes 300 rounds.

    Rounds are counted, not timed: every question waits until the schedule has nothing left
    to ask, then all waiting questions are answered at once (one round of the judge).
    """
    ts, ss = truths(30), scans(100)

    class Held(RandomJudge):
        waiting: list[asyncio.Future[None]]

        async def judge(
            self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
        ) -> Any:
            answered = asyncio.get_running_loop().create_future()
            self.waiting.append(answered)
            await answered
            return verdict("none")

    judge = Held(0, 0, 0, 0)
    judge.waiting = []

    async def go() -> int:
        task = asyncio.create_task(
            match_repo_concurrent(judge, ts, ss, batch_size=10, iterations=2)
        )
        rounds = 0
        while not task.done():
            # Let the schedule run until it stops asking: several idle passes in a row.
            idle, seen = 0, -1
            while idle < 20 and not task.done():
                await asyncio.sleep(0)
                idle = idle + 1 if len(judge.waiting) == seen else 0
                seen = len(judge.waiting)
            if judge.waiting:
                rounds += 1
                answering, judge.waiting = judge.waiting, []
                for answered in answering:
                    answered.set_result(None)
        await task
        return rounds

    rounds = asyncio.run(go())
    # The wavefront is about 30 + 10 rounds; one after another it would be 300.
    assert 30 <= rounds <= 45, rounds


def test_matches_of_earlier_truths_shift_later_batches() -> None:
    """Truth 0 takes finding 3; truth 1's first batch must be 0,1,2,4 (as sequential)."""
    asked: list[tuple[Any, tuple[int, ...]]] = []

    class Judge(RandomJudge):
        async def judge(
            self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
        ) -> Any:
            indices = tuple(s.index for s in batch)
            asked.append((truth.key, indices))
            if truth.key == "T0" and 3 in indices:
                return verdict("match", 3)
            return verdict("none")

    result = asyncio.run(
        match_repo_concurrent(Judge(0, 0, 0, 0), truths(2), scans(8), batch_size=4, iterations=1)
    )
    assert ("T1", (0, 1, 2, 4)) in asked
    assert ("T1", (0, 1, 2, 3)) not in asked
    assert result.final == {"T0": MATCH, "T1": NONE}


def test_prefilter_puts_the_k_most_similar_first() -> None:
    ts, ss = truths(1), scans(6)
    order = Prefilter(2, {"T0": [5, 1, 0, 2, 3, 4]})
    assert [s.index for s in order.arrange(ts[0], ss)] == [5, 1, 0, 2, 3, 4]
    assert [s.index for s in order.arrange(ts[0], [s for s in ss if s.index != 5])] == [
        1,
        0,
        2,
        3,
        4,
    ]
    # The walk over certain findings gives the same pool.
    got = pool_prefix(order, ts[0], ss, lambda i: 1 if i == 5 else 0, need=10)
    assert got is not None and [s.index for s in got[0]] == [1, 0, 2, 3, 4]
    # A finding not yet certain on the way: not ready.
    assert pool_prefix(order, ts[0], ss, lambda i: 2 if i == 1 else 0, need=1) is not None
    assert pool_prefix(order, ts[0], ss, lambda i: 2 if i == 1 else 0, need=2) is None


def test_prefilter_rejects_zero() -> None:
    with pytest.raises(ValueError, match="prefilter: k must be at least 1"):
        Prefilter(0, {})
