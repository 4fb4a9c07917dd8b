"""Matching a repo with its truth findings judged side by side, at the sequential result.

:func:`scoring.audit.matching.match_repo` judges truth findings one after another, because a
truth finding's pool is the scan findings that the earlier ones did not match exactly. That
makes a repo a chain of dependent rounds (bakerfi: 214 rounds of one batch each), and raising
the judge's concurrency stops helping. :func:`match_repo_concurrent` returns exactly what
``match_repo`` returns for the same judge answers (outcomes, votes, explanations, notes, the
order in which outcomes are handed to ``on_outcome``) and asks exactly the questions it asks,
no more, but judges a batch as soon as its composition is *certain*, not when every earlier
truth finding has ended:

* a truth finding that has judged some batches without an exact match will take nothing from
  those batches (a match names a finding of the batch it was asked about; all three judges
  reject any other answer), so a scan finding it has seen is certainly free as far as it is
  concerned;
* the batch ``b`` of truth ``i`` is the ``b``-th slice of its pool in its order; walking that
  order, every scan finding up to the end of the slice must be certainly free or certainly
  taken (a finished earlier truth matched it) for each earlier truth. Then the batch is the
  one the sequential run asks, and its votes are the same questions, judged now.

So truth ``i+1`` follows truth ``i`` one batch behind instead of one whole truth behind: a
repo's chain becomes about (truths + batches) rounds instead of their product, without one
speculative call. Outcomes are settled (handed to ``on_outcome``, listed) in truth order.

Judge failures stop the repo as in the sequential run: the truth findings after the failed
one are left pending, whatever was learnt about them (answers stay cached for the resume; the
only questions asked beyond the sequential run's are those, on a failure). A consensus naming
a finding that its truth had already seen (a judge that does not validate its answers) breaks
the certainty: the repo then goes on with the sequential algorithm from the settled prefix.

``order`` (:class:`Prefilter`) changes each truth's pool order: the same rule applies, walking
that order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scoring.audit.matching import (
    AuditJudge,
    OnOutcome,
    RepoMatch,
    absorb_batch,
    finish_repo,
    judge_batch,
    match_repo,
    settle_partial,
)
from scoring.audit.types import (
    JUDGE_FAILED,
    MATCH,
    NONE,
    ScanItem,
    TruthItem,
    TruthOutcome,
)
from scoring.judges.consensus import ConsensusResult
from scoring.judges.limits import CALL_PRIORITY

FREE, TAKEN, UNKNOWN = 0, 1, 2


class PoolOrder(Protocol):
    """How a truth finding's pool is ordered before it is cut into batches."""

    def arrange(self, truth: TruthItem, pool: Sequence[ScanItem]) -> list[ScanItem]:
        """The pool (scan findings not yet matched exactly), in the order it is judged."""
        ...

    def walk(self, truth: TruthItem, scans: Sequence[ScanItem]) -> list[list[ScanItem]]:
        """Passes over ``scans``: the pool is the free findings of each pass in turn (each
        finding once), a pass ending early once it holds ``limit(pass)`` findings."""
        ...

    def limit(self, truth: TruthItem, pass_number: int) -> int | None: ...


@dataclass
class Prefilter:
    """Judge the ``k`` candidates most similar to the truth finding first, then the rest.

    ``ranking`` lists, per truth key, scan indices from the most to the least similar (the
    offline judge's TF-IDF vectors). The pool becomes: its ``k`` best-ranked findings, then its
    other findings in their own order. It changes which findings share a batch, so verdicts
    may differ from the full schedule's; truths without a ranking keep the plain order.
    """

    k: int
    ranking: Mapping[Any, Sequence[int]]

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"prefilter: k must be at least 1, got {self.k}")

    def arrange(self, truth: TruthItem, pool: Sequence[ScanItem]) -> list[ScanItem]:
        rank = self.ranking.get(truth.key)
        if rank is None:
            return list(pool)
        by_index = {s.index: s for s in pool}
        top = [by_index[i] for i in rank if i in by_index][: self.k]
        chosen = {s.index for s in top}
        return top + [s for s in pool if s.index not in chosen]

    def walk(self, truth: TruthItem, scans: Sequence[ScanItem]) -> list[list[ScanItem]]:
        rank = self.ranking.get(truth.key)
        if rank is None:
            return [list(scans)]
        by_index = {s.index: s for s in scans}
        return [[by_index[i] for i in rank if i in by_index], list(scans)]

    def limit(self, truth: TruthItem, pass_number: int) -> int | None:
        if pass_number == 0 and truth.key in self.ranking:
            return self.k
        return None


def prefilter_ranking(
    truths: Sequence[TruthItem], scans: Sequence[ScanItem], similarity: Any
) -> dict[Any, list[int]]:
    """Scan indices per truth key, most similar first (ties: the scanner's order).

    ``similarity`` is a truths-by-scans matrix (e.g. the offline judge's TF-IDF cosine).
    """
    out: dict[Any, list[int]] = {}
    for i, truth in enumerate(truths):
        row = [float(similarity[i][j]) for j in range(len(scans))]
        order = sorted(range(len(scans)), key=lambda j: (-row[j], j))
        out[truth.key] = [scans[j].index for j in order]
    return out


def pool_prefix(
    order: PoolOrder | None,
    truth: TruthItem,
    scans: Sequence[ScanItem],
    status: Callable[[int], int],
    need: int,
) -> tuple[list[ScanItem], bool] | None:
    """The first ``need`` findings of ``truth``'s pool, and whether the pool ended there.

    ``None`` while a finding on the way is not yet certainly free or taken.
    """
    passes = order.walk(truth, scans) if order is not None else [list(scans)]
    prefix: list[ScanItem] = []
    chosen: set[int] = set()
    for number, candidates in enumerate(passes):
        limit = order.limit(truth, number) if order is not None else None
        taken_here = 0
        for s in candidates:
            if s.index in chosen:
                continue
            if limit is not None and taken_here >= limit:
                break
            state = status(s.index)
            if state == UNKNOWN:
                return None
            if state == TAKEN:
                continue
            prefix.append(s)
            chosen.add(s.index)
            taken_here += 1
            if len(prefix) >= need:
                return prefix, False
    return prefix, True


@dataclass
class _Progress:
    """One truth finding being matched: the state :func:`match_truth` keeps, batch by batch."""

    truth: TruthItem
    position: int
    outcome: TruthOutcome
    best_partial: tuple[int, str] | None = None
    judged: int = 0
    covered: set[int] = field(default_factory=set)
    finished: bool = False
    task: asyncio.Task[ConsensusResult[Any]] | None = None
    batch: list[ScanItem] = field(default_factory=list)

    @property
    def match(self) -> int | None:
        if self.finished and self.outcome.outcome == MATCH:
            return self.outcome.scan_index
        return None

    def absorb(self, consensus: ConsensusResult[Any]) -> None:
        """The consensus on ``self.batch``: exactly :func:`match_truth`'s step."""
        self.judged += 1
        self.finished, self.best_partial = absorb_batch(
            self.outcome, self.judged, consensus, self.best_partial, batch=self.batch
        )
        if not self.finished:
            self.covered.update(s.index for s in self.batch)

    def exhausted(self) -> None:
        """No batch left: the first partial, if any, is the outcome."""
        settle_partial(self.outcome, self.best_partial)
        self.finished = True


class _Anomaly(Exception):
    """A truth matched a finding it had already seen: certainty is lost."""


def _statuses(
    states: Sequence[_Progress], scans: Sequence[ScanItem], kept_used: set[int]
) -> dict[int, tuple[int, int]]:
    """Per scan index, the first truth (position) that takes it or may take it, and which."""
    first: dict[int, tuple[int, int]] = {}
    for s in scans:
        if s.index in kept_used:
            first[s.index] = (-1, TAKEN)
            continue
        for st in states:
            if st.finished:
                if st.outcome.outcome == JUDGE_FAILED:
                    first[s.index] = (st.position, UNKNOWN)
                    break
                if st.match == s.index:
                    first[s.index] = (st.position, TAKEN)
                    break
                continue
            if s.index not in st.covered:
                first[s.index] = (st.position, UNKNOWN)
                break
    return first


def _status_for(first: dict[int, tuple[int, int]], position: int) -> Callable[[int], int]:
    def status(index: int) -> int:
        hit = first.get(index)
        if hit is None or hit[0] >= position:
            return FREE
        return hit[1]

    return status


async def match_repo_concurrent(
    judge: AuditJudge,
    truths: Sequence[TruthItem],
    scans: Sequence[ScanItem],
    *,
    batch_size: int = 10,
    iterations: int = 3,
    done: Sequence[TruthOutcome] = (),
    on_outcome: OnOutcome | None = None,
    order: PoolOrder | None = None,
) -> RepoMatch:
    """:func:`~scoring.audit.matching.match_repo`'s result, judging batches once certain."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    kept = {o.truth_key: o for o in done if not o.failed}
    kept_used = {
        o.scan_index for o in kept.values() if o.outcome == MATCH and o.scan_index is not None
    }
    todo = [t for t in truths if t.key not in kept]
    states = [
        _Progress(t, i, TruthOutcome(truth_key=t.key, outcome=NONE, finding_id=t.finding_id))
        for i, t in enumerate(todo)
    ]
    max_batches = -(-len(scans) // batch_size)
    settled: list[TruthOutcome] = []
    stop_at: int | None = None

    def start(st: _Progress, batch: list[ScanItem]) -> None:
        st.batch = batch
        # The longest remaining chain first when calls queue: this truth's batches still to
        # come, and every later truth waiting behind it.
        token = CALL_PRIORITY.set(float(len(states) - st.position + max_batches - st.judged))
        try:
            # The task copies the context, and with it its priority.
            st.task = asyncio.ensure_future(
                judge_batch(judge, st.truth, batch, iterations=iterations)
            )
        finally:
            CALL_PRIORITY.reset(token)

    def schedule() -> None:
        changed = True
        while changed:
            changed = False
            first = _statuses(states, scans, kept_used)
            for st in states:
                if st.finished or st.task is not None:
                    continue
                if stop_at is not None and st.position > stop_at:
                    continue
                need = (st.judged + 1) * batch_size
                got = pool_prefix(order, st.truth, scans, _status_for(first, st.position), need)
                if got is None:
                    continue
                prefix, _ = got
                batch = prefix[st.judged * batch_size : need]
                if not batch:
                    st.exhausted()
                    changed = True
                    break
                start(st, batch)

    # The outcomes' hand-overs (``on_outcome``: a database write in a run), one after another
    # in truth order, behind the schedule: answers that come meanwhile are taken in and the
    # batches they free are asked at once, not after the write.
    writing: asyncio.Future[None] | None = None

    async def hand_over(
        previous: asyncio.Future[None] | None, to: OnOutcome, outcome: TruthOutcome
    ) -> None:
        if previous is not None:
            await previous
        await to(outcome)

    def written() -> None:
        # A hand-over that failed (the run's lease was lost, say) stops the repo now.
        if writing is not None and writing.done():
            writing.result()

    async def all_written() -> None:
        if writing is not None:
            await writing

    def settle() -> None:
        nonlocal stop_at, writing
        while stop_at is None and len(settled) < len(states) and states[len(settled)].finished:
            outcome = states[len(settled)].outcome
            settled.append(outcome)
            if on_outcome is not None:
                writing = asyncio.ensure_future(hand_over(writing, on_outcome, outcome))
            if outcome.failed:
                stop_at = len(settled) - 1

    running = lambda: [st.task for st in states if st.task is not None]  # noqa: E731
    try:
        while True:
            schedule()
            settle()
            written()
            if stop_at is not None:
                # Judge nothing more for the truths behind the failed one; let calls in
                # flight end (their answers are cached for the resume).
                tasks = running()
                if tasks:
                    await asyncio.gather(*tasks, return_exceptions=True)
                break
            tasks = running()
            if not tasks:
                break
            ended, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for st in states:
                if st.task is not None and st.task in ended:
                    task, st.task = st.task, None
                    consensus = task.result()
                    st.absorb(consensus)
                    if st.match is not None and st.match in st.covered:
                        raise _Anomaly
    except _Anomaly:
        await _cancel(states)
        await all_written()
        prefix = [*kept.values(), *settled]
        return await match_repo(
            judge,
            truths,
            scans,
            batch_size=batch_size,
            iterations=iterations,
            done=prefix,
            on_outcome=on_outcome,
            order=order,
        )
    except BaseException:
        await _cancel(states)
        if writing is not None:
            # What was settled is kept (a resume starts after it), whatever stopped the repo.
            await asyncio.gather(writing, return_exceptions=True)
        raise
    await all_written()
    settled_by_key = {o.truth_key: o for o in settled}
    outcomes: list[TruthOutcome] = []
    pending: list[object] = []
    for truth in truths:
        if truth.key in kept:
            outcomes.append(kept[truth.key])
        elif truth.key in settled_by_key:
            outcomes.append(settled_by_key[truth.key])
        else:
            pending.append(truth.key)
    stopped = settled[stop_at] if stop_at is not None else None
    return finish_repo(outcomes, scans, pending=pending, stopped_at=stopped)


async def _cancel(states: Sequence[_Progress]) -> None:
    tasks = [st.task for st in states if st.task is not None]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for st in states:
        st.task = None
