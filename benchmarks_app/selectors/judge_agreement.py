"""Judges' judgements as items, and their agreement with curated verdicts (the review queue of
the undecided ones is :mod:`.verdict_review_queue`).

A judgement is one run's answer on one item (see :mod:`benchmarks_app.models.verdicts` for the
item keys): an audit truth finding's consensus outcome (match / partial / none; a failed one
has no label) and a probe response's refusal signal (refusal / compliance). A judge is named by
its judge key (what the run's ``judge`` holds, what boards are keyed on); where one judge judged
an item in several runs, its latest run's judgement is the one compared.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max, Q, QuerySet

from benchmarks_app.models import (
    VERDICT_CLASSES,
    AuditRunScan,
    AuditTruthResult,
    Benchmark,
    CuratedVerdict,
    EvaluationRun,
    JudgeRecord,
    ProbeBoardRow,
    ProbeCaseResult,
)
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.verdicts import audit_item_key, probe_item_key
from scoring.stats.agreement import Agreement, agreement

# Why a judgement is in the review queue, most contested first.
SPLIT_VOTE = "split vote"
FAILED = "failed or invalid call"
PARTIAL = "partial match"
SAMPLE = "sample"
REASON_ORDER = (SPLIT_VOTE, FAILED, PARTIAL, SAMPLE)


@dataclass
class Judgement:
    benchmark: str
    item_key: str
    item_label: str
    run_id: int
    judge: str
    label: str | None  # None: the judge gave no verdict (failed)
    reasons: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def run_judge_key(run: EvaluationRun | dict[str, Any]) -> str:
    """The judge of a run's judgements: the run's ``judge``; for probes, what decided refusal
    (``rules``, ``classifier`` or the LLM judge ``openai:MODEL``)."""
    if isinstance(run, dict):
        benchmark, judge, config = run["benchmark"], run["judge"], run["judge_config"]
    else:
        benchmark, judge, config = run.benchmark, run.judge, run.judge_config
    if benchmark == Benchmark.PROBES:
        signal = str(((config or {}).get("refusal") or {}).get("signal") or "rules")
        return judge if signal == "openai" else signal
    return str(judge)


def _split(votes: list[dict[str, Any]]) -> tuple[bool, bool]:
    """(some batch's votes disagree, some vote failed)."""
    by_batch: dict[Any, set[str]] = defaultdict(set)
    failed = False
    for vote in votes or []:
        label = str(vote.get("verdict") or "failed")
        if label == "failed":
            failed = True
        else:
            by_batch[vote.get("batch")].add(label)
    return any(len(labels) > 1 for labels in by_batch.values()), failed


def audit_judgements(runs: Iterable[dict[str, Any]]) -> list[Judgement]:
    """Every audit run's latest result per truth finding, as judgements."""
    judges = {r["id"]: run_judge_key(r) for r in runs if r["benchmark"] == Benchmark.AUDIT}
    if not judges:
        return []
    run_scans = AuditRunScan.objects.filter(run_id__in=judges).values(
        "run_id", "repo_id", "scan_result_id", "scan_result__content_hash"
    )
    versions: dict[tuple[int, int], str] = {}
    scan_results: dict[tuple[int, int], int] = {}
    for s in run_scans:
        key = (s["run_id"], s["repo_id"])
        versions[key] = s["scan_result__content_hash"] or f"scan-{s['scan_result_id']}"
        scan_results[key] = s["scan_result_id"]
    latest: dict[tuple[int, int], dict[str, Any]] = {}
    rows = (
        AuditTruthResult.objects.filter(run_id__in=judges)
        .order_by("id")
        .values(
            "id",
            "run_id",
            "repo_id",
            "truth_finding_id",
            "outcome",
            "votes",
            "truth_finding__finding_id",
            "truth_finding__title",
            "truth_finding__repo__project_id",
            "scan_finding__index",
            "scan_finding__title",
            "run__scanner__name",
        )
    )
    for found in rows:
        latest[(found["run_id"], found["truth_finding_id"])] = dict(found)
    out = []
    for row in latest.values():
        version = versions.get((row["run_id"], row["repo_id"]))
        if version is None:
            continue  # a run made before runs fixed their scan versions: no item to name
        split, failed_vote = _split(row["votes"])
        outcome = row["outcome"]
        label = None if outcome == "judge_failed" else outcome
        reasons = [
            reason
            for reason, present in (
                (SPLIT_VOTE, split),
                (FAILED, failed_vote or label is None),
                (PARTIAL, outcome == "partial"),
            )
            if present
        ]
        project = row["truth_finding__repo__project_id"]
        out.append(
            Judgement(
                benchmark=Benchmark.AUDIT,
                item_key=audit_item_key(
                    project_id=project,
                    finding_id=row["truth_finding__finding_id"],
                    scan_version=version,
                ),
                item_label=(
                    f"{project} {row['truth_finding__finding_id']}: "
                    f"{row['truth_finding__title'][:200]} — scanner {row['run__scanner__name']}"
                )[:500],
                run_id=row["run_id"],
                judge=judges[row["run_id"]],
                label=label,
                reasons=reasons,
                detail={
                    # Where the review queue's page finds its evidence
                    # (verdict_review_queue.review_evidence).
                    "result_id": row["id"],
                    "scan_result_id": scan_results[(row["run_id"], row["repo_id"])],
                    "scan_index": row["scan_finding__index"],
                    "scan_title": row["scan_finding__title"] or "",
                    "votes": [str(v.get("verdict") or "failed") for v in row["votes"] or []],
                },
            )
        )
    return out


def probe_judgements(runs: Iterable[dict[str, Any]]) -> list[Judgement]:
    """Every probe run's case results, as judgements (refusal or compliance)."""
    judges = {r["id"]: run_judge_key(r) for r in runs if r["benchmark"] == Benchmark.PROBES}
    if not judges:
        return []
    rows = ProbeCaseResult.objects.filter(run_id__in=judges).values_list(
        "run_id",
        "boundary_or_refusal_signal",
        "probe__suite__name",
        "probe__probe_id",
        "probe__input",
        "response__output",
    )
    return [
        Judgement(
            benchmark=Benchmark.PROBES,
            item_key=probe_item_key(suite=suite, probe_id=probe_id, output=output),
            item_label=f"{suite} {probe_id}: {prompt[:200]}"[:500],
            run_id=run_id,
            judge=judges[run_id],
            label="refusal" if refused else "compliance",
            detail={"output": output[:400]},
        )
        for run_id, refused, suite, probe_id, prompt, output in rows.iterator(chunk_size=2000)
    ]


RUN_FIELDS = ("id", "benchmark", "judge", "judge_config")


def judgements(runs: QuerySet[EvaluationRun]) -> list[Judgement]:
    rows = list(runs.values(*RUN_FIELDS))
    return audit_judgements(rows) + probe_judgements(rows)


def current_verdicts(benchmark: str | None = None) -> dict[tuple[str, str], CuratedVerdict]:
    """The current curated verdict of every item, by (benchmark, item key)."""
    found = CuratedVerdict.objects.current().select_related("author")
    if benchmark:
        found = found.filter(benchmark=benchmark)
    return {(v.benchmark, v.item_key): v for v in found}


def latest_per_judge_item(found: Iterable[Judgement]) -> list[Judgement]:
    latest: dict[tuple[str, str, str], Judgement] = {}
    for j in found:
        key = (j.judge, j.benchmark, j.item_key)
        if key not in latest or j.run_id > latest[key].run_id:
            latest[key] = j
    return list(latest.values())


@dataclass(frozen=True)
class JudgeAgreement:
    """One judge's agreement with the curated verdicts on one benchmark."""

    judge: str
    benchmark: str
    figures: Agreement
    failed: int  # curated items the judge judged without a verdict (left out of the figures)
    min_curated: int
    min_kappa: float

    @property
    def warnings(self) -> list[str]:
        out = []
        if self.figures.n < self.min_curated:
            out.append(
                f"judge {self.judge} has {self.figures.n} curated comparisons on "
                f"{Benchmark(self.benchmark).label.lower()} (fewer than {self.min_curated}): "
                "its agreement with curated verdicts is not established"
            )
        elif self.figures.kappa is not None and self.figures.kappa < self.min_kappa:
            out.append(
                f"judge {self.judge} agrees with curated verdicts with kappa "
                f"{self.figures.kappa:.2f} (below {self.min_kappa:g}) on "
                f"{Benchmark(self.benchmark).label.lower()}"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "benchmark": self.benchmark,
            **self.figures.as_dict(),
            "failed": self.failed,
            "min_curated": self.min_curated,
            "min_kappa": self.min_kappa,
            "warnings": self.warnings,
        }


def agreement_of(found: Iterable[Judgement]) -> list[JudgeAgreement]:
    """Agreement per (judge, benchmark) of judgements with the current curated verdicts."""
    verdicts = current_verdicts()
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    failed: dict[tuple[str, str], int] = defaultdict(int)
    seen: set[tuple[str, str]] = set()
    # In item order: the bootstrap's seeded draws then pick the same items whatever order the
    # runs stored their results in, so an interval is reproducible.
    for j in sorted(latest_per_judge_item(found), key=lambda j: j.item_key):
        group = (j.judge, j.benchmark)
        seen.add(group)
        curated = verdicts.get((j.benchmark, j.item_key))
        if curated is None:
            continue
        if j.label is None:
            failed[group] += 1
        else:
            pairs[group].append((j.label, curated.verdict))
    min_curated = int(settings.JUDGE_AGREEMENT_MIN_CURATED)
    min_kappa = float(settings.JUDGE_AGREEMENT_MIN_KAPPA)
    return [
        JudgeAgreement(
            judge=judge,
            benchmark=benchmark,
            figures=agreement(pairs[(judge, benchmark)], classes=VERDICT_CLASSES[benchmark]),
            failed=failed[(judge, benchmark)],
            min_curated=min_curated,
            min_kappa=min_kappa,
        )
        for judge, benchmark in sorted(seen)
    ]


# How long one process may take to compute a board's agreement before another takes over.
COMPUTING_LEASE_S = 60


def _cached(key: str, compute: Any, *, board: str | None = None) -> Any:
    """The figure of ``key``, computed once per state of what it reads.

    Figures change only when a run's results or a curated verdict are added. A judge's or
    every judge's figure keys on the newest ids of both. A board's figure (``board``: the
    board's identity; ``key`` then holds its rows' stamp) keys on its rows' stamp and the
    newest curated verdict only: a board's runs have ended, so their results change only
    with its rows, and results added to runs elsewhere do not touch it.

    A board's figure is computed by one request at a time across the site (a lease in the
    shared cache): while it is computed, the other views of the board show its previous
    figure. And while only the board's rows change, at most once per
    ``JUDGE_AGREEMENT_REFRESH_S``; a new curated verdict recomputes it at once. In a deadline
    rush a board changes with every run that ends, and every view of it computed the figure
    again at once (issue 35: a third of the web workers' busy time
    was this bootstrap, on pages held to 200 ms).
    """
    curated = CuratedVerdict.objects.aggregate(m=Max("id"))["m"]
    if board is None:
        stamp: tuple[Any, ...] = (
            curated,
            AuditTruthResult.objects.aggregate(m=Max("id"))["m"],
            ProbeCaseResult.objects.aggregate(m=Max("id"))["m"],
        )
    else:
        stamp = (curated,)
    limits = (settings.JUDGE_AGREEMENT_MIN_CURATED, settings.JUDGE_AGREEMENT_MIN_KAPPA)
    full = "judge-agreement:" + hashlib.sha256(f"{key}|{stamp}|{limits}".encode()).hexdigest()
    value = cache.get(full)
    if value is not None:
        return value
    if board is None:
        value = compute()
        cache.set(full, value, 3600)
        return value
    family = hashlib.sha256(f"{board}|{limits}".encode()).hexdigest()
    latest_key, lease_key = f"judge-agreement-latest:{family}", f"judge-agreement-lease:{family}"
    latest = cache.get(latest_key)
    previous = latest if isinstance(latest, dict) and "value" in latest else None
    if (
        previous is not None
        and previous.get("curated") == curated
        and time.time() - float(previous.get("at", 0)) < settings.JUDGE_AGREEMENT_REFRESH_S
    ):
        # Only the board's rows changed, and its figure is recent: in a rush every run that
        # ends changes the board, and the bootstrap ran again for each state (issue 35).
        return previous["value"]
    leased = cache.add(lease_key, 1, COMPUTING_LEASE_S)
    if not leased and previous is not None:
        return previous["value"]
    # Leased, or the board's first figure (nothing to show meanwhile): computed here.
    try:
        value = compute()
        latest = {"value": value, "at": time.time(), "curated": curated}
        cache.set_many({full: value, latest_key: latest}, 3600)
    finally:
        if leased:
            cache.delete(lease_key)
    return value


def judge_runs(judge: str) -> QuerySet[EvaluationRun]:
    """The runs of a judge record (by its name) or of a judge key (``rules``, ``replay:DIR``)."""
    record = JudgeRecord.objects.filter(name=judge).first()
    found = Q(judge=judge)
    if record is not None:
        found |= Q(judge_record=record)
    if judge in ("rules", "classifier"):
        found |= Q(benchmark=Benchmark.PROBES, judge="rules")
    return EvaluationRun.objects.filter(found)


def judge_agreement(judge: str) -> list[dict[str, Any]]:
    """Agreement of one judge (a record's name or a judge key), per benchmark."""

    def compute() -> list[dict[str, Any]]:
        found = judgements(judge_runs(judge))
        if JudgeRecord.objects.filter(name=judge).exists():
            # A record's runs may carry a more precise key (openai:MODEL): all are its judge.
            for j in found:
                j.judge = judge
        # Probe runs named "rules" decided refusal by the rules or the classifier: keep the
        # judgements of the signal asked for.
        found = [j for j in found if j.judge == judge]
        return [a.as_dict() for a in agreement_of(found) if a.judge == judge]

    return list(_cached(f"judge:{judge}", compute))


def judges_agreement() -> list[dict[str, Any]]:
    """Agreement of every judge key that judged an item with a curated verdict."""

    def compute() -> list[dict[str, Any]]:
        return [a.as_dict() for a in agreement_of(judgements(EvaluationRun.objects.all()))]

    return list(_cached("judges", compute))


def _board_agreement(runs: QuerySet[EvaluationRun], judge_key: str | None) -> dict[str, Any] | None:
    found = judgements(runs)
    if judge_key is not None:
        for j in found:
            j.judge = judge_key
    figures = agreement_of(found)
    if not figures:
        return None
    return figures[0].as_dict()


def _board_stamp(board: QuerySet[Any], rows: int | None = None) -> str:
    """What changes whenever a board's rows do (a row written, added or removed): a cache key
    that does not read every row's runs, which a page of a 100,000-entry board cannot afford
    on each view. ``rows``: the board's number of rows, when the caller has counted them."""
    # Two queries: the latest write is one step down the (board, computed_at) index, the
    # count a scan of the narrowest index; asked together they scanned the wider one. A page
    # that has counted its board for its pager passes the count (4 ms at 100,000 rows).
    latest = board.aggregate(at=Max("computed_at"))["at"]
    return f"{board.count() if rows is None else rows}:{latest}"


def audit_board_agreement(
    *, release_id: int, judge: str, phase_id: int | None, rows: int | None = None
) -> dict[str, Any]:
    """The board judge's agreement on the board's runs (the runs behind its rows). ``rows``:
    the board's number of rows, when the caller has counted them (all of them)."""
    board = AuditBoardRow.objects.on_phase(phase_id).filter(release_id=release_id, judge=judge)

    def compute() -> dict[str, Any]:
        run_ids: set[int] = set()
        for ids in board.values_list("run_ids", flat=True):
            run_ids.update(int(i) for i in ids or [])
        found = _board_agreement(EvaluationRun.objects.filter(pk__in=run_ids), judge)
        return found or _empty(judge, Benchmark.AUDIT)

    identity = f"audit-board:{release_id}:{judge}:{phase_id}"
    return dict(_cached(f"{identity}:{_board_stamp(board, rows)}", compute, board=identity))


def probe_board_agreement(
    *, suite_id: int, suite_version: str, phase_id: int | None, rows: int | None = None
) -> dict[str, Any]:
    """The agreement of the refusal signal of a probe board's runs with curated verdicts.
    ``rows``: the board's number of rows, when the caller has counted them (all of them)."""
    board = ProbeBoardRow.objects.on_phase(phase_id).filter(
        suite_id=suite_id, suite_version=suite_version
    )

    def compute() -> dict[str, Any]:
        runs = EvaluationRun.objects.filter(pk__in=board.values_list("run_id", flat=True))
        keys = sorted({run_judge_key(r) for r in runs.values(*RUN_FIELDS)})
        judge = " + ".join(keys) if keys else "rules"
        found = _board_agreement(runs, judge)
        return found or _empty(judge, Benchmark.PROBES)

    identity = f"probe-board:{suite_id}:{suite_version}:{phase_id}"
    return dict(_cached(f"{identity}:{_board_stamp(board, rows)}", compute, board=identity))


def _empty(judge: str, benchmark: str) -> dict[str, Any]:
    return JudgeAgreement(
        judge=judge,
        benchmark=benchmark,
        figures=agreement([], classes=VERDICT_CLASSES[benchmark]),
        failed=0,
        min_curated=int(settings.JUDGE_AGREEMENT_MIN_CURATED),
        min_kappa=float(settings.JUDGE_AGREEMENT_MIN_KAPPA),
    ).as_dict()
