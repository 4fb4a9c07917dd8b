"""Why a run's items could not be judged: the failed items, their causes, and whether a resume
can change them.

A failed vote's reason is stored with its item's result (``votes[*].error`` of a judge-failed
:class:`AuditTruthResult` or :class:`ChecklistAssessment`), tagged with its kind (see
:mod:`scoring.judges.failures`). Only the items that are failed *now* count: for each item the
latest result decides, so an item that failed once and was judged after a resume is not a
cause any more. An item whose result names no reason borrows one from the run's ledger.

:func:`run_failed_items` names each failed item (truth finding and repo, checklist question,
probe) with its reasons; a reason that asking again cannot change (the replay judge's missing
verdict, a 401/403/404 from the server) makes the item *permanent*, and
:func:`run_resume_blocker` refuses a resume whose every item is, while the judge's fingerprint
(:func:`run_judge_fingerprint`) is the one the run failed with.

Each function costs a fixed number of queries, whatever the number of items.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks_app.models import (
    AssessmentStatus,
    AuditTruthResult,
    Benchmark,
    ChecklistAssessment,
    EvaluationRun,
    JudgeCall,
    JudgeCallStatus,
    MatchOutcome,
    PaperKind,
    ProbeCaseResult,
    Response,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES, RunStatus
from scoring.judges import failures
from scoring.judges.failures import FailureCause
from scoring.judges.usage import JudgeUsage, judge_usage

# Ledger statuses that end a call without a verdict, and the kind each one tells.
_LEDGER_KINDS = {
    JudgeCallStatus.ERROR: "",  # the ledger keeps the raw message: its kind is not known
    JudgeCallStatus.INVALID: failures.INVALID,
    "truncated": failures.TRUNCATED,
}


# The replay judge's reason for a truth finding its recording has no row for (one added to the
# truth after the reference pipeline ran), and for a repo it has no recording of at all.
_REPLAY_NO_ROW = re.compile(r"^replay: (?P<repo>.+) has \d+ recorded truth results, none for #\d+")
_REPLAY_NO_FILE = re.compile(r"^replay: no recorded results (?P<path>.+)$")
REPLAY_ADDED = "added after the recording: the replay judge has no verdict for it"
# Requests the server refuses whatever the item: the key, the address or the model is wrong.
_HTTP_CONFIG = re.compile(r"\bHTTP (?P<status>401|403|404)\b")

# Why a failure cannot change by asking again, and what to change instead.
PERMANENT_REPLAY = "replay"
PERMANENT_AUTH = "auth"
PERMANENT_NOT_FOUND = "not_found"
INSTEAD = {
    PERMANENT_REPLAY: "add verdicts for these truth findings to the recording (the replay "
    "folder's <repo>_results.json), or evaluate again with another judge (openai, offline)",
    PERMANENT_AUTH: "set a valid OPENAI_API_KEY (or an OPENAI_BASE_URL that accepts it)",
    PERMANENT_NOT_FOUND: "check OPENAI_BASE_URL and the judge model (JUDGE_MODEL, or the "
    "model named in the run's judge)",
}


def cause_reason(reason: str) -> str:
    """``reason`` as counted among a run's causes: the replay judge's reasons name the item's
    position, which would make one cause per item; they are folded into one."""
    text = failures.reason_key(reason)[1]
    if _REPLAY_NO_ROW.match(text):
        return "replay: truth findings added after the recording have no recorded verdict"
    return reason


def permanence(reason: str) -> str:
    """Why asking again cannot change this failure (a ``PERMANENT_*``), or "" when it may."""
    kind, text = failures.reason_key(reason)
    if _REPLAY_NO_ROW.match(text) or _REPLAY_NO_FILE.match(text):
        return PERMANENT_REPLAY
    if kind == failures.TRANSIENT:
        return ""
    m = _HTTP_CONFIG.search(text)
    if m is None:
        return ""
    return PERMANENT_NOT_FOUND if m.group("status") == "404" else PERMANENT_AUTH


@dataclass(frozen=True)
class FailedItem:
    """One item of a run that could not be judged, and why."""

    kind: str  # "truth_finding" | "question" | "probe"
    item_id: str  # the truth finding's id, the question's number, the probe's id
    where: str  # the repo's project id, the paper's kind; "" for probes
    reasons: tuple[str, ...]

    @property
    def label(self) -> str:
        if self.kind == "truth_finding":
            return f"truth finding {self.item_id} of repo {self.where}"
        if self.kind == "question":
            paper = f" of the {self.where.lower()} paper" if self.where else ""
            return f"question {self.item_id}{paper}"
        return f"probe {self.item_id}"

    @property
    def why(self) -> str:
        """The first reason, in words: the replay judge's missing verdict said as such."""
        if not self.reasons:
            return "no reason was recorded"
        kind, text = failures.reason_key(self.reasons[0])
        if _REPLAY_NO_ROW.match(text):
            return f"truth finding {self.item_id} {REPLAY_ADDED}"
        if m := _REPLAY_NO_FILE.match(text):
            return f"the replay judge has no recording for repo {self.where} ({m.group('path')})"
        return f"{kind}: {text}"[:200]

    @property
    def describe(self) -> str:
        if self.kind == "truth_finding" and self.why.startswith("truth finding"):
            return f"repo {self.where}: {self.why}"
        return f"{self.label}: {self.why}"

    @property
    def permanence(self) -> str:
        """A ``PERMANENT_*`` when every reason of the item is one; "" when any may change."""
        kinds = {permanence(r) for r in self.reasons}
        if not kinds or "" in kinds:
            return ""
        return sorted(kinds)[0]


def describe_failed_items(items: list[FailedItem], *, limit: int = 5) -> str:
    """``Failed: <item>: <why>; ...`` for a run's error, the first ``limit`` items."""
    if not items:
        return ""
    # Items that failed the same way are named together, the reason said once: fifteen
    # questions refused by one misconfigured server make one entry, not fifteen.
    groups: dict[str, list[FailedItem]] = {}
    for item in items:
        groups.setdefault(_why_key(item), []).append(item)
    if len(groups) == len(items):
        shown = "; ".join(item.describe for item in items[:limit])
        more = f"; and {len(items) - limit} more" if len(items) > limit else ""
        return f"Failed: {shown}{more}."
    parts = []
    for group in list(groups.values())[:limit]:
        if len(group) == 1:
            parts.append(group[0].describe)
            continue
        names = ", ".join(i.label for i in group[:3])
        rest = f" and {len(group) - 3} more" if len(group) > 3 else ""
        parts.append(f"{names}{rest}: {group[0].why}")
    more = f"; and {len(groups) - limit} more" if len(groups) > limit else ""
    return f"Failed: {'; '.join(parts)}{more}."


def _why_key(item: FailedItem) -> str:
    if not item.reasons:
        return "no reason was recorded"
    return "|".join(failures.cause_key(item.reasons[0]))


def _vote_reasons(votes: Any) -> list[str]:
    if not isinstance(votes, list):
        return []
    return list(
        dict.fromkeys(
            str(v.get("error") or "") for v in votes if isinstance(v, dict) and v.get("error")
        )
    )


def _latest_failed(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows``: (item id, ...) of failed results in storage order; the last one per item."""
    latest: dict[Any, tuple[Any, ...]] = {}
    for row in rows:
        latest[row[0]] = row
    return list(latest.values())


def _audit_failed_rows(run: EvaluationRun) -> list[tuple[Any, ...]]:
    """(truth id, votes, finding id, repo project id) of the truth findings failed now."""
    judged = AuditTruthResult.objects.filter(run=run).exclude(outcome=MatchOutcome.JUDGE_FAILED)
    rows = (
        AuditTruthResult.objects.filter(run=run, outcome=MatchOutcome.JUDGE_FAILED)
        .exclude(truth_finding_id__in=judged.values("truth_finding_id"))
        .order_by("created_at", "id")
        .values_list("truth_finding_id", "votes", "truth_finding__finding_id", "repo__project_id")
    )
    return _latest_failed(rows)


def _checklist_failed_rows(run: EvaluationRun) -> list[tuple[Any, ...]]:
    """(answer id, votes, question number, paper kind) of the answers failed now."""
    decided = ChecklistAssessment.objects.filter(run=run).exclude(
        status=AssessmentStatus.JUDGE_FAILED
    )
    rows = (
        ChecklistAssessment.objects.filter(run=run, status=AssessmentStatus.JUDGE_FAILED)
        .exclude(answer_id__in=decided.values("answer_id"))
        .order_by("created_at", "id")
        .values_list("answer_id", "votes", "answer__question__number", "answer__paper__kind")
    )
    return _latest_failed(rows)


def _probe_failed_rows(run: EvaluationRun, *, ending: bool) -> list[tuple[Any, ...]]:
    """(response id, submission id, probe id) of responses a failed run left without a verdict.

    A probe run stores no row for a response its judge could not label, so the failed ones
    are those without a case result once the run has ended with failed items (or, with
    ``ending``, while its processor ends it).
    """
    ended = run.failed_items and run.status not in ACTIVE_STATUSES
    if not (ending or ended) or not run.probe_submission_id:
        return []
    scored = ProbeCaseResult.objects.filter(run=run).values("response_id")
    return list(
        Response.objects.filter(submission_id=run.probe_submission_id)
        .exclude(pk__in=scored)
        .order_by("id")
        .values_list("pk", "submission_id", "probe__probe_id")
    )


def _ledger_reasons(run: EvaluationRun) -> list[str]:
    """One reason per call of this attempt of the run whose latest try gave no verdict.

    Newest first. The ledger does not say which item a call served (a call is one vote of one
    item, keyed by its prompt hash), so these stand in for items whose result has no reason.
    """
    calls = JudgeCall.objects.filter(run=run)
    if run.started_at is not None:
        calls = calls.filter(created_at__gte=run.started_at)
    failed = calls.filter(status__in=list(_LEDGER_KINDS)).exclude(error="")
    rows = (
        calls.filter(prompt_hash__in=failed.values("prompt_hash"))
        .order_by("created_at", "id")
        .values_list("prompt_hash", "status", "error")
    )
    last: dict[str, tuple[str, str]] = {}
    for prompt_hash, status, error in rows:
        last.pop(prompt_hash, None)  # keep the calls in the order of their latest try
        last[prompt_hash] = (status, error)
    reasons = []
    for status, error in reversed(list(last.values())):
        if status not in _LEDGER_KINDS or not error:
            continue
        kind = _LEDGER_KINDS[status]
        if kind and failures.kind_of(error) == failures.OTHER:
            error = failures.tag(kind, error)
        reasons.append(error)
    return reasons


def run_failed_items(*, run: EvaluationRun, ending: bool = False) -> list[FailedItem]:
    """The items of ``run`` that are failed now, each named, with its votes' reasons.

    Audit: truth findings whose latest result is judge-failed; checklist: answers with a
    judge-failed assessment and no decided one; probes: responses that a run ended with failed
    items left unlabelled (``ending``: the run is being ended with failed items now). An item
    whose result names no reason borrows one from the ledger.
    """
    if run.benchmark == Benchmark.AUDIT:
        items = [
            FailedItem(
                kind="truth_finding",
                item_id=str(finding_id),
                where=str(project_id),
                reasons=tuple(_vote_reasons(votes)),
            )
            for _, votes, finding_id, project_id in _audit_failed_rows(run)
        ]
    elif run.benchmark == Benchmark.CHECKLIST:
        items = [
            FailedItem(
                kind="question",
                item_id=str(number),
                where=str(PaperKind(paper_kind).label if paper_kind in PaperKind.values else ""),
                reasons=tuple(_vote_reasons(votes)),
            )
            for _, votes, number, paper_kind in _checklist_failed_rows(run)
        ]
    elif run.benchmark == Benchmark.PROBES:
        items = [
            FailedItem(kind="probe", item_id=str(probe_id), where="", reasons=())
            for _, _, probe_id in _probe_failed_rows(run, ending=ending)
        ]
    else:
        return []
    missing = [i for i, item in enumerate(items) if not item.reasons]
    if missing:
        for i, reason in zip(missing, _ledger_reasons(run), strict=False):
            items[i] = replace(items[i], reasons=(reason,))
    return items


def run_failed_item_reasons(*, run: EvaluationRun) -> list[list[str]]:
    """The reasons of each item of ``run`` that is failed now (one list per item).

    Reasons that name one item's position (the replay judge's) are folded into one cause.
    """
    if run.benchmark == Benchmark.PROBES:
        return []  # their causes were given to run_finish by the processor itself
    return [[cause_reason(r) for r in item.reasons] for item in run_failed_items(run=run)]


def run_failure_causes(*, run: EvaluationRun) -> list[FailureCause]:
    """The distinct causes of ``run``'s failed items, with counts of items, most frequent first.

    Empty when nothing failed, or when no reason was recorded anywhere.
    """
    return failures.summarize_items(run_failed_item_reasons(run=run))


def ended_run_failure_causes(*, run: EvaluationRun) -> list[FailureCause]:
    """:func:`run_failure_causes` of a run that ended with failed items; else none, no query.

    What pages and the API show: a queued or running run (a resumed one included) has no
    failed items yet.
    """
    if not run.failed_items or run.status in ACTIVE_STATUSES:
        return []
    return run_failure_causes(run=run)


# Where a failed run keeps the fingerprint of what its judge depended on (run_resume reads it).
FINGERPRINT_KEY = "failed_with"


def stored_judge_config(run_id: int) -> dict[str, Any]:
    # Read afresh: the processor may have recorded its judge's request settings meanwhile.
    value = EvaluationRun.objects.filter(pk=run_id).values_list("judge_config", flat=True).first()
    return dict(value) if isinstance(value, dict) else {}


def run_judge_fingerprint(run: EvaluationRun) -> str:
    """A digest of what a permanent failure depends on: the judge and its model, the server's
    address and key (hashed), and for the replay judge its recording's files (name, size,
    modification time). Resuming is refused only while it is unchanged."""
    config = run.judge_config or {}
    refusal = config.get("refusal") if isinstance(config.get("refusal"), dict) else {}
    parts: dict[str, Any] = {
        "judge": run.judge,
        "model": str(config.get("model") or (refusal or {}).get("model") or settings.JUDGE_MODEL),
        "base_url": str(getattr(settings, "OPENAI_BASE_URL", "") or ""),
        "api_key": hashlib.sha256(
            str(getattr(settings, "OPENAI_API_KEY", "") or "").encode()
        ).hexdigest(),
    }
    if run.judge.startswith("replay:"):
        folder = Path(run.judge.removeprefix("replay:"))
        try:
            parts["recording"] = [
                (p.name, p.stat().st_size, p.stat().st_mtime_ns)
                for p in sorted(folder.glob("*_results.json"))
            ]
        except OSError as exc:
            parts["recording"] = f"unreadable: {exc}"
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def permanent_text(items: list[FailedItem]) -> str:
    """What resuming cannot fix among ``items``, and what to change instead ("" if nothing)."""
    permanent = [item for item in items if item.permanence]
    if not permanent:
        return ""
    instead = "; ".join(dict.fromkeys(INSTEAD[item.permanence] for item in permanent))
    who = "them" if len(permanent) == len(items) else f"{len(permanent)} of them"
    return f"Resuming cannot judge {who} as things stand: {instead}."


def run_resume_blocker(run: EvaluationRun) -> str:
    """Why resuming ``run`` would repeat its failures exactly ("" when it may help).

    Only a run that ended with failed items, every one of them failed for a reason asking
    again cannot change (the replay judge's missing verdict, a 401/403/404 from the server),
    while nothing those reasons depend on has changed since (:func:`run_judge_fingerprint`).
    A run that failed before fingerprints were kept is let through.
    """
    if run.status != RunStatus.FAILED or not run.failed_items:
        return ""
    stored = (run.judge_config or {}).get(FINGERPRINT_KEY)
    if not stored or stored != run_judge_fingerprint(run):
        return ""
    items = run_failed_items(run=run)
    if not items or any(not item.permanence for item in items):
        return ""
    instead = "; ".join(dict.fromkeys(INSTEAD[item.permanence] for item in items))
    return (
        f"Run #{run.pk} was not queued again: its {len(items)} failed item(s) would fail the "
        f"same way, since nothing they depend on has changed. {describe_failed_items(items)} "
        f"Instead: {instead}; then resume it."
    )


# Ledger statuses of requests actually sent to the judge (a cached verdict cost nothing).
_SENT = ("ok", "invalid", "truncated", "error", "lost")


def run_judge_usage(*, run: EvaluationRun) -> JudgeUsage:
    """Calls (new / cached), tokens, latency percentiles and estimated cost of ``run``'s judge.

    Latency is over the requests sent; the cost uses JUDGE_PRICE_IN_PER_MTOK and
    JUDGE_PRICE_OUT_PER_MTOK when either is set, and JUDGE_PRICE_CACHED_IN_PER_MTOK for the
    input tokens the server read from its prompt cache.
    """
    from django.db.models import Count, Sum

    calls = JudgeCall.objects.filter(run=run)
    sent = calls.filter(status__in=_SENT)
    totals = sent.aggregate(
        n=Count("id"),
        tin=Sum("tokens_in"),
        tout=Sum("tokens_out"),
        treason=Sum("tokens_reasoning"),
        tcached=Sum("tokens_cached"),
    )
    latencies = list(sent.exclude(status="lost").values_list("latency_ms", flat=True))
    return judge_usage(
        calls_new=int(totals["n"] or 0),
        calls_cached=calls.filter(status="cached").count(),
        tokens_in=int(totals["tin"] or 0),
        tokens_out=int(totals["tout"] or 0),
        tokens_reasoning=int(totals["treason"] or 0),
        tokens_cached=int(totals["tcached"] or 0),
        latencies_ms=latencies,
        price_in_per_mtok=float(getattr(settings, "JUDGE_PRICE_IN_PER_MTOK", 0.0) or 0.0),
        price_out_per_mtok=float(getattr(settings, "JUDGE_PRICE_OUT_PER_MTOK", 0.0) or 0.0),
        price_cached_in_per_mtok=_cached_price(),
    )


def _cached_price() -> float | None:
    price = getattr(settings, "JUDGE_PRICE_CACHED_IN_PER_MTOK", None)
    return None if price is None else float(price)
