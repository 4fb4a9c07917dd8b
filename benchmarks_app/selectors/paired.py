"""What the paired rule reads: a board's ranked rows and each entry's per-item scores.

A board is named by a :class:`BoardKey` (``audit:RELEASE:PHASE:JUDGE``,
``probes:SUITE:PHASE:VERSION``, ``checklist:CHALLENGE:PHASE:``; PHASE ``-`` for none). The
items are those the board's own intervals resample: an audit entry's truth findings (hit or
missed, and its repo's share of the reported findings), a probe entry's cases (weighted risk),
a checklist entry's questions (:func:`scoring.checklist.scores.s_units`). Each entry comes
with its item keys, so only entries scored on the same items are paired.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from django.db.models import Model, Q, QuerySet

from benchmarks_app.formatting import whole_number
from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    ChecklistAssessment,
    ChecklistBoardRow,
    ProbeBoardRow,
    ProbeCaseResult,
)
from benchmarks_app.models.audit import AuditBoardRow, MatchOutcome
from benchmarks_app.models.checklist import AssessmentStatus, PaperKind, SubmissionKind
from benchmarks_app.selectors.board_marks import (
    AUDIT_SHAPE,
    CHECKLIST_SHAPE,
    PROBE_SHAPE,
    own_order,
)
from scoring.audit.board import f1_with_partial_of_sums
from scoring.checklist.questions import QUESTION_NUMBERS
from scoring.checklist.scores import PaperAssessment, s_from_sums, s_units
from scoring.probes.metrics import resilience_from_sums
from scoring.stats import DEFAULT_RESAMPLES
from scoring.stats.paired import PAIRED_SEED, PairedEntry, paired_difference

KINDS = ("audit", "probes", "checklist")
_KEY = re.compile(r"(audit|probes|checklist):([0-9]+):(-|[0-9]+):(.*)")


class BadBoardKey(ValueError):
    """A board key that names no board kind or has malformed parts."""


@dataclass(frozen=True)
class BoardKey:
    kind: str
    scope: int
    phase_id: int | None
    label: str = ""

    def __str__(self) -> str:
        phase = "-" if self.phase_id is None else str(self.phase_id)
        return f"{self.kind}:{self.scope}:{phase}:{self.label}"

    @classmethod
    def parse(cls, text: str) -> BoardKey:
        found = _KEY.fullmatch(text)
        scope = whole_number(found.group(2)) if found else None
        phase = None if not found or found.group(3) == "-" else whole_number(found.group(3))
        if found is None or scope is None or (found.group(3) != "-" and phase is None):
            raise BadBoardKey(f"board: {text[:200]!r} is not KIND:ID:PHASE:LABEL")
        return cls(found.group(1), scope, phase, found.group(4))


@dataclass(frozen=True)
class BoardSpec:
    """How a board kind stores its rows: the model, its metric column and tie column."""

    model: type[Model]
    value: str
    tie: str
    ranked: Q


SPECS = {
    "audit": BoardSpec(AuditBoardRow, "f1_with_partial", "tied_with_above", Q(is_complete=True)),
    "probes": BoardSpec(
        ProbeBoardRow, "resilience_index", "tied", Q(resilience_index__isnull=False)
    ),
    "checklist": BoardSpec(ChecklistBoardRow, "s", "tied", Q()),
}


SHAPES = {"audit": AUDIT_SHAPE, "probes": PROBE_SHAPE, "checklist": CHECKLIST_SHAPE}


def board_queryset(key: BoardKey) -> QuerySet[Any]:
    """Every stored row of the board ``key`` names (unordered)."""
    model = SPECS[key.kind].model
    rows = model.objects.on_phase(key.phase_id)  # type: ignore[attr-defined]
    if key.kind == "audit":
        return rows.filter(release_id=key.scope, judge=key.label)
    if key.kind == "probes":
        return rows.filter(suite_id=key.scope, suite_version=key.label)
    return rows.filter(challenge_id=key.scope)


def board_key_of_row(kind: str, row: Any) -> BoardKey:
    if kind == "audit":
        return BoardKey("audit", row.release_id, row.phase_id, row.judge)
    if kind == "probes":
        return BoardKey("probes", row.suite_id, row.phase_id, row.suite_version)
    return BoardKey("checklist", row.challenge_id, row.phase_id, "")


@dataclass(frozen=True)
class RankedRow:
    pk: int
    position: int
    value: float
    ci_low: float | None
    ci_high: float | None
    exact: bool


def ranked_rows(key: BoardKey) -> list[RankedRow]:
    """The board's ranked rows in board order (light columns only)."""
    spec = SPECS[key.kind]
    extra = ("kind",) if key.kind == "checklist" else ()
    rows = (
        board_queryset(key)
        .filter(spec.ranked)
        .order_by(*own_order(SHAPES[key.kind]))
        .values_list("pk", spec.value, "ci_low", "ci_high", *extra)
    )
    out = []
    # Ranked rows come first in the board's order: their places are 1, 2, ...
    for position, (pk, value, low, high, *rest) in enumerate(rows, start=1):
        exact = bool(rest) and rest[0] == SubmissionKind.GENUINE_ONLY and value == 0
        out.append(RankedRow(pk, position, float(value or 0.0), low, high, exact))
    return out


Items = tuple[tuple[Any, ...], PairedEntry]


def _audit_items(pks: list[int]) -> dict[int, Items]:
    ids = dict(AuditBoardRow.objects.filter(pk__in=pks).values_list("pk", "repo_result_ids"))
    wanted = {i for values in ids.values() for i in values}
    results = {
        r["pk"]: r
        for r in AuditRepoResult.objects.filter(pk__in=wanted).values(
            "pk", "run_id", "repo_id", "metrics"
        )
    }
    outcomes: dict[tuple[int, int], list[tuple[int, bool]]] = defaultdict(list)
    hit = {MatchOutcome.MATCH, MatchOutcome.PARTIAL}
    for run_id, repo_id, finding, outcome in (
        AuditTruthResult.objects.filter(run_id__in={r["run_id"] for r in results.values()})
        .exclude(outcome=MatchOutcome.JUDGE_FAILED)
        .values_list("run_id", "repo_id", "truth_finding_id", "outcome")
    ):
        outcomes[(run_id, repo_id)].append((finding, outcome in hit))
    out: dict[int, Items] = {}
    for pk, result_ids in ids.items():
        units: list[tuple[int, float, float]] = []
        fixed = 0.0
        for rid in result_ids:
            result = results.get(rid)
            if result is None:
                continue
            metrics = result["metrics"] or {}
            truth = int(metrics.get("truth") or 0)
            reported = float(int(metrics.get("scan") or 0) - int(metrics.get("qa") or 0))
            if truth <= 0:
                fixed += reported
                continue
            for finding, was_hit in outcomes[(result["run_id"], result["repo_id"])]:
                units.append((finding, float(was_hit), reported / truth))
        units.sort()
        matrix = np.asarray([[h, s] for _, h, s in units], dtype=np.float64).reshape(-1, 2)
        statistic = partial(f1_with_partial_of_sums, units=len(units), fixed_reported=fixed)
        out[pk] = (tuple(f for f, _, _ in units), PairedEntry(matrix, statistic))
    return out


def _probe_items(pks: list[int]) -> dict[int, Items]:
    runs = dict(ProbeBoardRow.objects.filter(pk__in=pks).values_list("pk", "run_id"))
    cases: dict[int, dict[int, float]] = defaultdict(dict)
    for run_id, probe_id, risk in ProbeCaseResult.objects.filter(
        run_id__in=set(runs.values())
    ).values_list("run_id", "probe_id", "weighted_risk"):
        cases[run_id][probe_id] = risk
    out: dict[int, Items] = {}
    for pk, run_id in runs.items():
        keys = tuple(sorted(cases[run_id]))
        matrix = np.asarray([cases[run_id][k] for k in keys], dtype=np.float64)
        out[pk] = (keys, PairedEntry(matrix, partial(resilience_from_sums, n=len(keys))))
    return out


def _checklist_items(pks: list[int]) -> dict[int, Items]:
    runs = dict(ChecklistBoardRow.objects.filter(pk__in=pks).values_list("pk", "run_id"))
    papers: dict[int, dict[str, tuple[dict[int, str], dict[int, int]]]] = defaultdict(dict)
    for run_id, kind, number, answer, correct in (
        ChecklistAssessment.objects.filter(run_id__in=set(runs.values()))
        .exclude(status=AssessmentStatus.JUDGE_FAILED)
        .values_list(
            "run_id", "answer__paper__kind", "answer__question__number", "answer__answer", "correct"
        )
    ):
        answers, correct_map = papers[run_id].setdefault(kind, ({}, {}))
        answers[number] = answer
        correct_map[number] = int(correct or 0)
    out: dict[int, Items] = {}
    for pk, run_id in runs.items():
        built = {k: PaperAssessment(answers=a, correct=c) for k, (a, c) in papers[run_id].items()}
        genuine = built.get(PaperKind.GENUINE)
        if genuine is None:
            continue
        adversarial, truth = built.get(PaperKind.ADVERSARIAL), built.get(PaperKind.TRUTH)
        if (adversarial is None) != (truth is None):
            continue
        matrix = s_units(genuine, adversarial, truth)
        out[pk] = (QUESTION_NUMBERS, PairedEntry(matrix, s_from_sums))
    return out


def board_items(kind: str, pks: list[int]) -> dict[int, Items]:
    """Per row id: its item keys and its :class:`PairedEntry` (rows whose items cannot be
    read are left out)."""
    loader = {"audit": _audit_items, "probes": _probe_items, "checklist": _checklist_items}
    return loader[kind](pks) if pks else {}


def paired_fields(row: Any, *, pending: bool = False) -> dict[str, Any]:
    """A stored row's paired marks as the boards show them; all None while pending (the
    page then shows the unpaired marks with a note)."""
    low, high, tied = row.paired_rank_low, row.paired_rank_high, row.paired_tied
    if pending or low is None:
        return {"paired_rank_low": None, "paired_rank_high": None, "paired_tied": None}
    return {"paired_rank_low": low, "paired_rank_high": high, "paired_tied": tied}


def paired_pending(key: BoardKey) -> bool:
    """Whether the board's paired marks wait for a refresh (a run ended since)."""
    from benchmarks_app.models import PairedRefresh

    return PairedRefresh.objects.filter(board=str(key)).exists()


def paired_summary(key: BoardKey) -> Any | None:
    """What the last paired refresh of board ``key`` did (pairs tested, split, correction),
    or None before its first."""
    from benchmarks_app.models import PairedBoardSummary

    return PairedBoardSummary.objects.filter(board=str(key)).first()


def visible_board_row(key: BoardKey, pk: int, user: Any) -> Any | None:
    """Row ``pk`` of board ``key`` if ``user`` may see it, else None (as if absent).

    A hidden phase's board not yet revealed shows staff every row and a signed-in
    participant only their own entries (audit: their scanners; probes: their submissions;
    checklist: their teams'), as the board pages do.
    """
    from benchmarks_app.models import Membership
    from benchmarks_app.selectors.phases import phase_board_visible

    row = board_queryset(key).filter(pk=pk).select_related("phase").first()
    if row is None:
        return None
    if phase_board_visible(row.phase, user):
        return row
    if not getattr(user, "is_authenticated", False):
        return None
    if key.kind == "audit":
        mine = row.scanner.owner_id == user.pk
    elif key.kind == "probes":
        mine = row.owner_id == user.pk
    else:
        mine = Membership.objects.filter(team_id=row.team_id, user=user).exists()
    return row if mine else None


class NotComparable(ValueError):
    """Two entries that cannot be compared pairwise; the message is ``"field: problem"``."""


class EntryNotFound(LookupError):
    """An entry that is not on the board or not visible; the message is ``"field: problem"``."""


def rule_fixed_order(key: BoardKey, rows: list[Any]) -> str:
    """Why the board orders two of its rows by rule rather than by their intervals, or "".

    The checklist challenge's rule: a genuine-only entry scores S = 0 exactly (it has no A
    and T papers to measure), so it ranks below every entry with S > 0, whatever the
    intervals or the paired difference say.
    """
    if key.kind != "checklist" or len(rows) != 2:
        return ""
    fixed = [r.kind == SubmissionKind.GENUINE_ONLY and not r.s for r in rows]
    if fixed[0] == fixed[1]:
        return ""
    other = rows[1] if fixed[0] else rows[0]
    if not other.s:
        return ""
    return (
        "A genuine-only entry has S = 0 by the challenge's rule (no A and T papers, nothing "
        "measured), so the board ranks it below every entry with S > 0, whatever the "
        "interval of their difference says."
    )


def paired_compare(*, board: BoardKey, a: int, b: int, user: Any) -> dict[str, Any]:
    """The paired difference ``a - b`` of two rows (ids) of ``board`` that ``user`` may see,
    with its 95% paired interval (:func:`scoring.stats.paired.paired_difference`), the
    exact test's p-value on the items where the two differ, and the resampled differences
    (``draws``, for the page's picture; the API leaves them out)."""
    rows = []
    for name, pk in (("a", a), ("b", b)):
        row = visible_board_row(board, pk, user)
        if row is None:
            raise EntryNotFound(f"{name}: no entry {pk} on board {board}")
        rows.append(row)
    items = board_items(board.kind, [a, b])
    for name, pk in (("a", a), ("b", b)):
        if pk not in items:
            raise NotComparable(f"{name}: no per-item scores stored for this entry")
    (keys_a, entry_a), (keys_b, entry_b) = items[a], items[b]
    if keys_a != keys_b or not keys_a:
        raise NotComparable("b: the two entries were not scored on the same items")
    diff = paired_difference(entry_a, entry_b, resamples=DEFAULT_RESAMPLES, seed=PAIRED_SEED)
    if diff is None:
        raise NotComparable("b: the difference is undefined on every resample")
    return {
        "board": str(board),
        "a": a,
        "b": b,
        "difference": diff.value,
        "low": diff.low,
        "high": diff.high,
        "level": diff.level,
        "percentile": diff.percentile,
        "resamples": diff.resamples,
        "seed": diff.seed,
        "significant": diff.significant,
        "interval_excludes_zero": diff.interval_excludes_zero,
        "p_value": diff.p_value,
        "exact_p": diff.exact_p,
        "items": len(keys_a),
        "discordant_items": diff.discordant,
        "rule_fixed": rule_fixed_order(board, rows),
        "draws": diff.draws,
    }
