"""The safety-probe boards: which suite and phase a board request means, its stored rows
(``ProbeBoardRow``) that a reader may see, their order and paging, and the row as the pages
and the API show it.

A board is one (suite, suite version, phase) triple; its rows are written when runs end
(:mod:`benchmarks_app.services.probes.boards`), so reading one is a few small queries. A
hidden phase's board, until revealed, shows staff every row and a participant their own only,
without places. The reports that point at a board are :mod:`.probes`'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Case, IntegerField, OuterRef, QuerySet, Subquery, Value, When

from benchmarks_app.models import Phase, ProbeSuite
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks, light_fields, own_order
from benchmarks_app.selectors.board_ordering import Ordered, Reversed
from benchmarks_app.selectors.phases import phase_board_visible
from scoring.probes.metrics import RANKING_METRIC


class ProbeReportNotFound(LookupError):
    """The submission does not exist or has no scored run yet."""


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


def own_probe_board_row_ids(user: Any) -> set[int]:
    """The ids of the probe board rows of ``user``'s own submissions ("you are here"); none
    for an anonymous reader."""
    if not getattr(user, "is_authenticated", False):
        return set()
    return set(ProbeBoardRow.objects.filter(owner=user).values_list("pk", flat=True))


def probe_board_page_values(ids: list[int]) -> dict[int, dict[str, Any]]:
    """The stored board rows ``ids`` (a page whose ids a board selector chose, so seen by its
    viewer) by pk, with only what a row needs (:data:`ROW_COLUMNS` and the light marks)."""
    return {
        values["pk"]: values
        for values in ProbeBoardRow.objects.filter(pk__in=ids).values(
            *ROW_COLUMNS, *light_fields(PROBE_SHAPE)
        )
    }


def probe_board_keys(
    *, suite: str, phase: Phase | None, version: str | None = None
) -> list[tuple[int, str]]:
    """(suite id, suite version) of each stored board of ``suite`` in ``phase`` (None: the
    board of all entries), ``version`` only where given. Which of them a viewer may read the
    numbers of is the caller's (``phase_board_visible``)."""
    rows = ProbeBoardRow.objects.on_phase(phase).filter(suite__name=suite)
    if version is not None:
        rows = rows.filter(suite_version=version)
    return list(rows.order_by().values_list("suite_id", "suite_version").distinct())
