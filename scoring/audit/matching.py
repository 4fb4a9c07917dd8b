"""Matching scan findings to ground truth with a judge and majority votes (pure, async).

For each truth finding, in order: the scan findings not yet exactly matched are split into
batches; each batch is judged by up to ``iterations`` votes (see
:func:`scoring.judges.consensus.run_consensus`); an exact match ends the search and takes that
scan finding out of every later pool (one-to-one); otherwise the first partial is kept. A batch
whose votes cannot be obtained makes the truth finding *judge-failed*: it is neither a match
nor a miss, and a resumed run judges it again.

A judge failure stops the repo: the later truth findings are left unjudged (neither matches
nor misses) until a resumed run has judged the failed one. Matching them anyway would let
them take scan findings exactly that the failed one could have had in truth order, so the
result would depend on when an API error happened; stopping keeps a failed-then-resumed run
equal to an uninterrupted one. (The other remedy, judging again every outcome after the first
failure on resume, would replace stored outcomes, and results are append-only.)

:func:`postprocess` then drops partials on scan findings that an exact match used, keeps only
the first partial per scan finding and lists the false positives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scoring.audit.types import (
    JUDGE_FAILED,
    MATCH,
    NONE,
    PARTIAL,
    AuditVerdict,
    ScanItem,
    TruthItem,
    TruthOutcome,
    VoteLog,
)
from scoring.judges.consensus import ConsensusResult, Vote, run_consensus


class PoolOrder(Protocol):
    """Rearranges a truth finding's pool before it is batched (see ``scoring.audit.schedule``)."""

    def arrange(self, truth: TruthItem, pool: Sequence[ScanItem]) -> list[ScanItem]: ...


class AuditJudge(Protocol):
    """Answers one vote for one truth finding against one batch; raises ``VoteFailed``."""

    name: str
    model: str

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict: ...


def invalid_reason(verdict: AuditVerdict, batch: Sequence[ScanItem]) -> str | None:
    """A match or partial must name a scan finding of the batch (never -1)."""
    if not (verdict.is_match or verdict.is_partial_match):
        return None
    allowed = [s.index for s in batch]
    index = verdict.index_of_finding_from_junior_auditor
    if index not in allowed:
        return (
            f"index_of_finding_from_junior_auditor={index} is not one of the findings in this "
            f"batch ({', '.join(map(str, allowed))}) although a match was claimed"
        )
    return None


def audit_tie_break(votes: Sequence[Vote[AuditVerdict]]) -> Vote[AuditVerdict]:
    """No majority: 1 exact + 1 partial + 1 neither → the partial; any other split → first."""
    labels = sorted(v.label or "" for v in votes)
    if len(votes) == 3 and labels == sorted([MATCH, PARTIAL, NONE]):
        return next(v for v in votes if v.label == PARTIAL)
    return votes[0]


def batches_of(pool: Sequence[ScanItem], batch_size: int) -> list[list[ScanItem]]:
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    return [list(pool[i : i + batch_size]) for i in range(0, len(pool), batch_size)]


async def judge_batch(
    judge: AuditJudge,
    truth: TruthItem,
    batch: Sequence[ScanItem],
    *,
    iterations: int,
) -> ConsensusResult[AuditVerdict]:
    async def ask(n: int) -> AuditVerdict:
        return await judge.judge(truth, batch, vote_number=n)

    return await run_consensus(
        ask, lambda v: v.label, iterations=iterations, tie_break=audit_tie_break
    )


def absorb_batch(
    result: TruthOutcome,
    b: int,
    consensus: ConsensusResult[AuditVerdict],
    best_partial: tuple[int, str] | None,
    *,
    batch: Sequence[ScanItem] = (),
) -> tuple[bool, tuple[int, str] | None]:
    """Batch ``b``'s consensus into ``result``: the one step of matching a truth finding.

    Shared by :func:`match_truth` and the concurrent schedule (``scoring.audit.schedule``), so
    both record the same votes and outcome. Returns (finished, the first partial so far):
    finished on a match or a failed batch. ``batch``: the scan findings asked about, kept on
    each vote (``seen``) for the review queue.
    """
    seen = tuple(s.index for s in batch)
    for vote in consensus.votes:
        v = vote.verdict
        result.votes.append(
            VoteLog(
                batch=b,
                number=vote.number,
                label=vote.label,
                index=v.index_of_finding_from_junior_auditor if v else None,
                explanation=v.explanation if v else "",
                error=vote.error,
                seen=seen,
            )
        )
    verdict = consensus.verdict
    if verdict is None:
        result.outcome = JUDGE_FAILED
        result.scan_index = None
        result.explanation = f"Batch {b}: {consensus.reason}"
        result.notes.append(f"batch {b} failed: {consensus.reason}")
        return True, best_partial
    index = verdict.index_of_finding_from_junior_auditor
    if best_partial is None:
        result.explanation = verdict.explanation
    if consensus.label == MATCH:
        result.outcome = MATCH
        result.scan_index = index
        result.explanation = verdict.explanation
        return True, best_partial
    if consensus.label == PARTIAL and best_partial is None:
        best_partial = (index, verdict.explanation)
    return False, best_partial


def settle_partial(result: TruthOutcome, best_partial: tuple[int, str] | None) -> None:
    """No batch left: the first partial, if any, is the outcome."""
    if best_partial is not None:
        result.outcome = PARTIAL
        result.scan_index, result.explanation = best_partial


async def match_truth(
    judge: AuditJudge,
    truth: TruthItem,
    pool: Sequence[ScanItem],
    *,
    batch_size: int = 10,
    iterations: int = 3,
) -> TruthOutcome:
    result = TruthOutcome(truth_key=truth.key, outcome=NONE, finding_id=truth.finding_id)
    best_partial: tuple[int, str] | None = None
    for b, batch in enumerate(batches_of(pool, batch_size), start=1):
        consensus = await judge_batch(judge, truth, batch, iterations=iterations)
        finished, best_partial = absorb_batch(result, b, consensus, best_partial, batch=batch)
        if finished:
            return result
    settle_partial(result, best_partial)
    return result


@dataclass
class RepoMatch:
    """Outcomes of one repo in truth order, and what post-processing made of them."""

    outcomes: list[TruthOutcome]
    final: dict[object, str] = field(default_factory=dict)  # truth key → final outcome
    false_positives: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Truth keys left unjudged behind a judge-failed one (see the module docstring).
    pending: list[object] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.final.values() if o == outcome)

    @property
    def is_complete(self) -> bool:
        return not self.pending and not self.count(JUDGE_FAILED)


def postprocess(outcomes: Sequence[TruthOutcome], scans: Sequence[ScanItem]) -> RepoMatch:
    exact_by_index: dict[int, TruthOutcome] = {}
    for o in outcomes:
        if o.outcome == MATCH and o.scan_index is not None:
            exact_by_index.setdefault(o.scan_index, o)
    final: dict[object, str] = {}
    notes: list[str] = []
    partial_by_index: dict[int, TruthOutcome] = {}
    for o in outcomes:
        if o.outcome != PARTIAL or o.scan_index is None:
            final[o.truth_key] = o.outcome
            continue
        if o.scan_index in exact_by_index:
            final[o.truth_key] = NONE
            notes.append(
                f"Partial of truth {o.label} on scan finding #{o.scan_index} dropped: "
                f"truth {exact_by_index[o.scan_index].label} matched it exactly."
            )
        elif o.scan_index in partial_by_index:
            final[o.truth_key] = NONE
            notes.append(
                f"Partial of truth {o.label} on scan finding #{o.scan_index} dropped: "
                f"truth {partial_by_index[o.scan_index].label} already holds a partial on it."
            )
        else:
            partial_by_index[o.scan_index] = o
            final[o.truth_key] = PARTIAL
    used = set(exact_by_index) | set(partial_by_index)
    false_positives = [s.index for s in scans if s.index not in used and not s.is_qa]
    return RepoMatch(list(outcomes), final, false_positives, notes)


OnOutcome = Callable[[TruthOutcome], Awaitable[None]]


async def match_repo(
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
    """Match a repo; ``done`` holds outcomes from an earlier attempt that are kept as they are.

    Truth findings are judged in order, and the first judge-failed one stops the repo: the
    ones after it are listed in ``RepoMatch.pending``, with no outcome. A resumed attempt
    (``done``: the final outcomes stored so far) judges the failed one again and goes on
    from there in truth order, so its result equals that of an attempt that never failed.
    Each new outcome is handed to ``on_outcome`` as soon as it is known, so that a crash
    loses at most one truth finding. ``order`` rearranges each pool before it is batched
    (the optional pre-filter, :class:`scoring.audit.schedule.Prefilter`).

    This is the reference schedule: :func:`scoring.audit.schedule.match_repo_concurrent`
    gives the same result and asks the same questions with far fewer dependent rounds.
    """
    kept = {o.truth_key: o for o in done if not o.failed}
    # With a stop at the first failure, ``kept`` is a prefix in truth order and this is what
    # an uninterrupted attempt had used by then. (Runs stored before that rule may hold
    # outcomes after a gap: their matches stay taken, which keeps the matching one-to-one.)
    used = {o.scan_index for o in kept.values() if o.outcome == MATCH}
    outcomes: list[TruthOutcome] = []
    pending: list[object] = []
    stopped_at: TruthOutcome | None = None
    for truth in truths:
        if truth.key in kept:
            outcomes.append(kept[truth.key])
            continue
        if stopped_at is not None:
            pending.append(truth.key)
            continue
        pool = [s for s in scans if s.index not in used]
        if order is not None:
            pool = order.arrange(truth, pool)
        outcome = await match_truth(
            judge, truth, pool, batch_size=batch_size, iterations=iterations
        )
        if outcome.outcome == MATCH and outcome.scan_index is not None:
            used.add(outcome.scan_index)
        if on_outcome is not None:
            await on_outcome(outcome)
        outcomes.append(outcome)
        if outcome.failed:
            stopped_at = outcome
    return finish_repo(outcomes, scans, pending=pending, stopped_at=stopped_at)


def finish_repo(
    outcomes: Sequence[TruthOutcome],
    scans: Sequence[ScanItem],
    *,
    pending: Sequence[object],
    stopped_at: TruthOutcome | None,
) -> RepoMatch:
    """Post-process a repo's outcomes and say what waits (shared by both schedules)."""
    result = postprocess(outcomes, scans)
    result.pending = list(pending)
    if stopped_at is not None and pending:
        result.notes.append(
            f"Judging stopped at truth {stopped_at.label} (the judge failed); "
            f"{len(pending)} later truth finding(s) wait for it, since they are matched in "
            "truth order. Resume the run to judge them."
        )
    if not scans:
        result.notes.append(
            "The scanner reported no findings for this repo: no false positives, and every "
            "truth finding is a miss."
        )
    return result
