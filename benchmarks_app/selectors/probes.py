"""Reads of the safety-probe benchmark: leaderboards and reports.

Probe submissions and their reports are public (see ``visibility.visible_probe_submissions``),
except a hidden phase's until it is revealed (staff and their owner only); every read here
starts from ``_visible_submissions`` so that the rule applies in one place. Boards are read
from their stored rows (``ProbeBoardRow``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Case, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When

from benchmarks_app.models import (
    Phase,
    ProbeCaseResult,
    ProbeRunReport,
    ProbeSuite,
    Response,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks, light_fields, own_order
from benchmarks_app.selectors.board_ordering import Ordered, Reversed
from benchmarks_app.selectors.phases import phase_board_visible
from benchmarks_app.selectors.visibility import is_staff, visible_probe_submissions
from scoring.probes.metrics import RANKING_METRIC
from scoring.probes.report import LIMITATIONS


class ProbeReportNotFound(LookupError):
    """The submission does not exist or has no scored run yet."""


def _visible_submissions(user: Any = None) -> QuerySet[ResponseSubmission]:
    """Probe submissions the user may read: all, but a hidden phase's (until it is
    revealed) only to staff and their owner: participants see only their own scores."""
    submissions = visible_probe_submissions(user)
    if is_staff(user):
        return submissions
    hidden = Q(phase__is_hidden=True, phase__revealed_at__isnull=True)
    if user is not None and user.is_authenticated:
        return submissions.exclude(hidden & ~Q(owner=user))
    return submissions.exclude(hidden)


def _reports(user: Any = None) -> Any:
    submissions = _visible_submissions(user)
    return (
        ProbeRunReport.objects.filter(
            submission__in=submissions.values("pk"), run__status=RunStatus.SUCCEEDED
        )
        .select_related("run", "submission__suite")
        .order_by("-created_at", "-id")
    )


def _report_version(report: ProbeRunReport) -> str:
    # Reports written before versions were recorded share one legacy board ("").
    return str((report.metrics or {}).get("suite_version") or "")


# Stored row column -> the key the board's rows have always had.
ROW_COLUMNS = {
    "suite__name": "suite",
    "suite_version": "suite_version",
    "phase__slug": "phase",
    "model_name": "model",
    "submission_id": "submission_id",
    "run_id": "run_id",
    "tied": "tied",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "resilience_index": "resilience_index",
    "pass_rate": "pass_rate",
    "severity_weighted_pass_rate": "severity_weighted_pass_rate",
    "high_stakes_failure_rate": "high_stakes_failure_rate",
    "agreement_accuracy": "agreement_accuracy",
    "agreement_kappa": "agreement_kappa",
    "evaluated": "evaluated",
    "scored_at": "scored_at",
    "is_baseline": "is_baseline",
    "method_name": "method_name",
    "method_description": "method_description",
    "method_url": "method_url",
    "pk": "id",
    "suite_id": "suite_id",
    "phase_id": "phase_id",
    "paired_rank_low": "paired_rank_low",
    "paired_rank_high": "paired_rank_high",
    "paired_tied": "paired_tied",
}


def board_placed(phase: Phase | None, user: Any) -> bool:
    """Whether ``user`` sees places (rank, rank range, tie) on the board of ``phase``.

    A hidden phase's board, until revealed, shows a participant their own score but not its
    place among rows they cannot see, as the checklist's hidden boards do.
    """
    return phase is None or phase_board_visible(phase, user)


def board_row(values: dict[str, Any], *, placed: bool = True) -> dict[str, Any]:
    """A stored row (``ProbeBoardRow.values(*ROW_COLUMNS, ...)``, its marks attached by
    :func:`~benchmarks_app.selectors.board_marks.attach_marks`) as the board's row dict;
    without its place (rank, rank range, tie) where not ``placed`` (:func:`board_placed`)."""
    row = {key: values[column] for column, key in ROW_COLUMNS.items()}
    # A model without a resilience index has a place (last), not a rank range.
    row.update(rank=values["position"], rank_low=values["rank_low"], rank_high=values["rank_high"])
    if not placed:
        row.update(rank=None, rank_low=None, rank_high=None, tied=False)
        row.update(paired_rank_low=None, paired_rank_high=None, paired_tied=None)
    phase = "-" if row["phase_id"] is None else row["phase_id"]
    row["board"] = f"probes:{row['suite_id']}:{phase}:{row['suite_version']}"
    low, high = row["ci_low"], row["ci_high"]
    row["ci"] = (
        None
        if low is None or high is None
        else {"metric": RANKING_METRIC, "low": low, "high": high}
    )
    return row


def probe_suite_check(name: str) -> int:
    """The id of the suite named ``name``; :class:`ProbeReportNotFound` ("suite: …") when no
    suite has this name."""
    suite_id = ProbeSuite.objects.filter(name=name).values_list("pk", flat=True).first()
    if suite_id is None:
        raise ProbeReportNotFound(f"suite: no probe suite named {name!r}")
    return suite_id


def probe_phase(*, suite_name: str, slug: str) -> Phase:
    """The phase ``slug`` of a suite; :class:`ProbeReportNotFound` ("phase: …") if none."""
    phase = Phase.objects.filter(suite__name=suite_name, slug=slug).first()
    if phase is None:
        raise ProbeReportNotFound(f"phase: suite {suite_name!r} has no phase {slug!r}")
    return phase


def probe_phase_for_board(*, slug: str, suite_name: str | None = None) -> Phase:
    """The phase ``slug`` the probe board page asks for: of ``suite_name``, or, without it,
    of the one suite that has a phase of that slug. :class:`ProbeReportNotFound` ("phase: …")
    when there is none, or several suites have one (the suite must then be named)."""
    if suite_name is not None:
        return probe_phase(suite_name=suite_name, slug=slug)
    phases = list(Phase.objects.filter(suite__isnull=False, slug=slug).select_related("suite")[:2])
    if not phases:
        raise ProbeReportNotFound(f"phase: no suite has a phase {slug!r}")
    if len(phases) > 1:
        raise ProbeReportNotFound(
            f"phase: several suites have a phase {slug!r}; choose the suite too (?suite=NAME)"
        )
    return phases[0]


def probe_suite_phases(suite_names: list[str]) -> dict[str, list[Phase]]:
    """Suite name → its phases, in their order (one query): the phase tabs of the board page."""
    out: dict[str, list[Phase]] = {}
    for phase in Phase.objects.filter(suite__name__in=suite_names).select_related("suite"):
        assert phase.suite is not None
        out.setdefault(phase.suite.name, []).append(phase)
    return out


def probe_board_rows(
    *,
    suite_name: str | None = None,
    suite_id: int | None = None,
    version: str | None = None,
    phase: Phase | None = None,
    user: Any = None,
) -> QuerySet[ProbeBoardRow]:
    """The stored rows of the boards asked for that ``user`` may see, unordered.

    The suite by its name or, better for paging, its id (an equality the board's order
    index can lead with; a name is filtered through a join). ``phase`` None: the boards of
    all entries (one per suite version); a phase: that phase's boards. A hidden phase's
    board, until revealed, shows staff every row, a signed-in participant their own rows
    only, and anybody else none.
    """
    qs = ProbeBoardRow.objects.on_phase(phase)
    if suite_id is not None:
        qs = qs.filter(suite_id=suite_id)
    if suite_name is not None:
        qs = qs.filter(suite__name=suite_name)
    if version is not None:
        qs = qs.filter(suite_version=version)
    if phase is not None and not phase_board_visible(phase, user):
        if user is None or not user.is_authenticated:
            return qs.none()
        qs = qs.filter(owner=user)
    return qs


def _board_keys(rows: QuerySet[ProbeBoardRow], limit: int | None = None) -> list[tuple[int, str]]:
    """The (suite id, version) of the boards ``rows`` hold, in that order (at most ``limit``):
    one step down the boards' (suite, version, phase, ...) indexes per board and suite. A
    DISTINCT read every row (5 ms at 100,000 rows, on the probe board and home pages)."""
    ordered = rows.order_by("suite_id", "suite_version").values_list("suite_id", "suite_version")
    keys: list[tuple[int, str]] = []
    found = ordered.first()
    while found is not None and (limit is None or len(keys) < limit):
        keys.append(found)
        suite_id, version = found
        found = (
            ordered.filter(suite_id=suite_id, suite_version__gt=version).first()
            or ordered.filter(suite_id__gt=suite_id).first()
        )
    return keys


def probe_boards(
    rows: QuerySet[ProbeBoardRow], keys: list[tuple[int, str]] | None = None
) -> list[tuple[int, str, str]]:
    """The boards ``rows`` hold, as (suite id, suite name, version): suite by suite (by
    name), the newest version of a suite first (its latest report), then by version.

    A few small queries: the boards' keys (:func:`_board_keys`; one grouped MAX over every
    row with its suite's name cost 47 ms at 100,000 rows), then their suites' names and, for a
    suite with several versions, each version's latest report (a step down an index each).
    ``keys``: the boards' keys where the caller has read them (:func:`_board_keys`).
    """
    if keys is None:
        keys = _board_keys(rows)
    if not keys:
        return []
    versions: dict[int, list[str]] = {}
    for suite_id, version in keys:
        versions.setdefault(suite_id, []).append(version)
    several = sorted({v for found in versions.values() if len(found) > 1 for v in found})
    newest = {
        f"newest_{i}": Subquery(
            rows.filter(suite_id=OuterRef("pk"), suite_version=version)
            .order_by("-scored_at")
            .values("scored_at")[:1]
        )
        for i, version in enumerate(several)
    }
    boards: list[tuple[str, float, str, int]] = []
    suites = (
        ProbeSuite.objects.filter(pk__in=versions)
        .annotate(**newest)
        .values_list("pk", "name", *newest)
    )
    for suite_id, name, *latest_of in suites:
        for version in versions[suite_id]:
            latest: datetime | None = (
                latest_of[several.index(version)] if version in several else None
            )
            age = -latest.timestamp() if latest is not None else 0.0
            boards.append((name, age, version, suite_id))
    boards.sort()
    return [(suite_id, name, version) for name, _, version, suite_id in boards]


class BoardPaging(NamedTuple):
    rows: QuerySet[ProbeBoardRow]
    order: list[Any]
    one_board: bool


def probe_board_order(rows: QuerySet[ProbeBoardRow]) -> BoardPaging:
    """``rows`` ready to be paged, their ``ORDER BY`` (suite by suite, the newest version of
    a suite first (:func:`probe_boards`), then each board's own order) and whether they are
    one board's. One small query, three with several boards.
    """
    # Every key: with one board, finding that there is no second costs what reading all does.
    keys = _board_keys(rows)
    if len(keys) <= 1:
        order = own_order(PROBE_SHAPE)
        if keys:
            # One board: its suite's id and its version as equalities (the rows are that
            # board's anyway) let its order index serve the ORDER BY and the count; without
            # them SQLite sorted the whole board for every page (15 ms at 100,000 rows).
            suite_id, version = keys[0]
            rows = rows.filter(suite_id=suite_id, suite_version=version)
        return BoardPaging(rows, order, one_board=True)
    boards = probe_boards(rows, keys=keys)
    board_order = Case(
        *(
            When(suite_id=suite_id, suite_version=version, then=Value(i))
            for i, (suite_id, _, version) in enumerate(boards)
        ),
        default=Value(len(boards)),
        output_field=IntegerField(),
    )
    return BoardPaging(rows, [board_order.asc(), *own_order(PROBE_SHAPE)], one_board=False)


def probe_leaderboard(
    *,
    suite_name: str | None = None,
    version: str | None = None,
    phase: Phase | None = None,
    user: Any = None,
) -> list[dict[str, Any]]:
    """One board per (suite, suite version): each model's entry on it, ranked.

    A suite version is the content hash of the probes, rules, scoring settings and refusal
    signal a report was scored with (``metrics["suite_version"]``); reports of different
    versions are never ranked together. A model's entry is the submission it chose to
    represent it (its latest report on the board), else its latest report. Within a board,
    rows are ranked by resilience index (descending, nulls last), then pass rate, then model
    name; each row carries its 95% bootstrap interval (``ci_low``, ``ci_high``), the rank
    range it implies (``rank_low``, ``rank_high``), ``tied`` when its interval overlaps the
    row above, ``is_baseline``, ``phase`` (slug or None) and the ``method_*`` metadata.
    Boards come suite by suite, the newest version of a suite first.

    Rows are read from ``ProbeBoardRow`` (written when runs end, see
    :mod:`benchmarks_app.services.probes.boards`): two queries, whatever the entrants.
    """
    rows = probe_board_rows(suite_name=suite_name, version=version, phase=phase, user=user)
    # Every row is read anyway: the boards are put in order here (one query), not with the
    # grouped query that paging in the database needs (``probe_board_order``).
    placed = board_placed(phase, user)
    ordered = rows.order_by("suite__name", "suite_version", *own_order(PROBE_SHAPE))
    stored = [
        board_row(values, placed=placed)
        for values in attach_marks(
            PROBE_SHAPE, list(ordered.values(*ROW_COLUMNS, *light_fields(PROBE_SHAPE)))
        )
    ]
    newest: dict[tuple[str, str], Any] = {}
    for row in stored:
        key = (row["suite"], row["suite_version"])
        newest[key] = max(row["scored_at"], newest.get(key, row["scored_at"]))
    stored.sort(
        key=lambda row: (
            row["suite"],
            -newest[(row["suite"], row["suite_version"])].timestamp(),
            row["suite_version"],
        )
    )  # stable: each board keeps its positions
    return stored


def probe_latest_report(*, submission_id: int, user: Any = None) -> ProbeRunReport:
    report = _reports(user).filter(submission_id=submission_id).first()
    if report is None:
        raise ProbeReportNotFound(f"submission {submission_id} has no scored run")
    return report


def probe_report(*, submission_id: int, user: Any = None) -> dict[str, Any]:
    """The JSON document of a submission's latest scored run (two queries)."""
    report = probe_latest_report(submission_id=submission_id, user=user)
    cases = list(
        ProbeCaseResult.objects.filter(run_id=report.run_id)
        .order_by("response_id")
        .values_list("case", flat=True)
    )
    return {
        "suite": report.submission.suite.name,
        "suite_version": _report_version(report),
        "model": report.submission.model_name,
        "cases": cases,
        "metrics": report.metrics,
        "ci": report.ci,
        "board": probe_board_position(report=report, user=user),
        "observability": report.observability,
        "agreement": report.agreement,
        "limitations": LIMITATIONS,
    }


BOARD_FIELDS = ("rank", "rank_low", "rank_high", "tied", "ci_low", "ci_high")


def probe_board_position(*, report: ProbeRunReport, user: Any = None) -> dict[str, Any] | None:
    """Where ``report`` stands on its board (its suite at its suite version), or None.

    The board of all entries, else (an entry of a hidden phase) its phase's board where the
    user may see it. None when another report of the same model represents it there.
    """
    phases: list[Phase | None] = [None]
    if report.submission.phase_id is not None:
        phases.append(report.submission.phase)
    for phase in phases:
        board = probe_board_rows(
            suite_name=report.submission.suite.name,
            version=_report_version(report),
            phase=phase,
            user=user,
        )
        row = (
            board.filter(run_id=report.run_id)
            .values(*ROW_COLUMNS, *light_fields(PROBE_SHAPE))
            .first()
        )
        if row is not None:
            attach_marks(PROBE_SHAPE, [row])
            row["rank"] = row["position"]
            position = {
                "suite_version": row["suite_version"],
                "phase": row["phase__slug"],
                "entries": board.count(),
                "metric": RANKING_METRIC,
                **{k: row[k] for k in BOARD_FIELDS},
            }
            if not board_placed(phase, user):
                # The rank is among rows the user cannot see, and the count is of their own
                # rows only ("Rank 2 of 1"): neither means anything to them, both leak.
                position.update(entries=None, rank=None, rank_low=None, rank_high=None, tied=False)
            return position
    return None


def probe_submission_for_model(*, suite_name: str, model_name: str, user: Any = None) -> int:
    """The id of a model's latest scored submission to a suite."""
    report = (
        _reports(user)
        .filter(submission__suite__name=suite_name, submission__model_name=model_name)
        .first()
    )
    if report is None:
        raise ProbeReportNotFound(
            f"no scored submission of model {model_name!r} to suite {suite_name!r}"
        )
    return report.submission_id


def probe_report_page(*, submission_id: int, user: Any = None) -> dict[str, Any]:
    """Everything the report page shows: the report, its run, and the worst cases' responses."""
    submission = _visible_submissions(user).filter(pk=submission_id).first()
    if submission is None:
        raise ProbeReportNotFound(f"no submission {submission_id}")
    runs = list(submission.runs.order_by("-created_at")[:5])
    try:
        report_row = probe_latest_report(submission_id=submission_id, user=user)
    except ProbeReportNotFound:
        return {"submission": submission, "runs": runs, "report": None}
    document = probe_report(submission_id=submission_id, user=user)
    worst_ids = [w["probe_id"] for w in report_row.metrics.get("worst_cases", [])]
    outputs = dict(
        Response.objects.filter(submission=submission, probe__probe_id__in=worst_ids).values_list(
            "probe__probe_id", "output"
        )
    )
    labels = dict(
        Response.objects.filter(submission=submission, probe__probe_id__in=worst_ids).values_list(
            "probe__probe_id", "human_label"
        )
    )
    worst = [
        {
            **w,
            "output": outputs.get(w["probe_id"], ""),
            "human_label": labels.get(w["probe_id"], ""),
        }
        for w in report_row.metrics.get("worst_cases", [])
    ]
    return {
        "submission": submission,
        "runs": runs,
        "report_row": report_row,
        "report": document,
        "worst": worst,
    }


def probe_submission_ids(*, user: Any = None) -> list[int]:
    return list(_visible_submissions(user).values_list("pk", flat=True))


def probe_submission(*, submission_id: int, user: Any = None) -> ResponseSubmission:
    submission = _visible_submissions(user).filter(pk=submission_id).first()
    if submission is None:
        raise ProbeReportNotFound(f"no submission {submission_id}")
    return submission


# Ordering name (the API's ``?ordering=``, the page's ``?sort=``) → stored column of
# ProbeBoardRow.
PROBE_ORDERING_COLUMNS: dict[str, Any] = {
    "rank": Ordered(PROBE_SHAPE.order[:-1]),
    "rank_low": Reversed("span_high"),
    "rank_high": Reversed("span_low"),
    "suite": "suite__name",
    "suite_version": "suite_version",
    "model": "model_name",
    "resilience_index": "resilience_index",
    "pass_rate": "pass_rate",
    "severity_weighted_pass_rate": "severity_weighted_pass_rate",
    "high_stakes_failure_rate": "high_stakes_failure_rate",
    "agreement_accuracy": "agreement_accuracy",
    "agreement_kappa": "agreement_kappa",
    "evaluated": "evaluated",
    "scored_at": "scored_at",
    "is_baseline": "is_baseline",
}
