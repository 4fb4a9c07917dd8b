"""Audit boards: which board a request means, and its stored rows.

A board is one (dataset release, judge) pair; its rows are written when a run ends
(:mod:`benchmarks_app.services.audit.boards`), so reading one is a constant number of queries.
Without a choice, the dataset's official release and judge are shown (see
:func:`resolve_board`); every answer names the release and judge it is about.

A release with phases (development, final, …) has, besides its whole board (rows with no
phase), one board per phase, of that phase's runs only. A hidden phase's board is for staff
until it is revealed; meanwhile a participant sees only the rows of their own scanners
(:func:`board_row_queryset`). A scanner's owner may choose which of its complete runs stands
for it on a board (``EvaluationRun.board_choice``); otherwise each repo's latest result does
(:mod:`.audit_board_results` picks them, and the board key a run counts on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Count, F, QuerySet
from django.db.models.functions import Lower

from benchmarks_app.formatting import whole_number
from benchmarks_app.models import (
    Phase,
    Repo,
    Scanner,
)
from benchmarks_app.models.audit import AuditBoardRow, AuditDataset, DatasetRelease
from benchmarks_app.selectors.audit_board_results import default_judge_key, release_repo_ids
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, attach_marks, own_order
from benchmarks_app.selectors.board_ordering import Ordered, Reversed
from benchmarks_app.selectors.paired import paired_fields
from benchmarks_app.selectors.phases import phase_board_visible

# The columns of ``audit_leaderboard --format json`` and ``/api/audit/leaderboard/``.
PUBLIC_ROW_KEYS = (
    "scanner",
    "rank",
    "rank_low",
    "rank_high",
    "complete",
    "repos_evaluated",
    "repos_total",
    "tp",
    "partial",
    "fp",
    "fn",
    "precision",
    "recall",
    "f1",
    "f1_with_partial",
    "f1_with_partial_ci",
)


# The paired rule's marks (scoring.stats.paired), after the documented keys; null until the
# board's paired marks are computed.
PAIRED_ROW_KEYS = ("paired_rank_low", "paired_rank_high", "paired_tied")


class BoardNotFound(LookupError):
    """No such dataset, release or judge board; the message is ``"field: problem"``."""


def release_repos(release: DatasetRelease) -> list[Repo]:
    return list(Repo.objects.filter(pk__in=release_repo_ids(release)).order_by("project_id"))


def published_release(dataset: AuditDataset) -> DatasetRelease | None:
    """The dataset's official release, or its latest published one."""
    if dataset.official_release_id is not None:
        official = dataset.official_release
        if official is not None and official.is_published:
            return official
    return dataset.releases.filter(is_published=True).order_by("-number").first()


def default_dataset() -> AuditDataset | None:
    """The first dataset (by slug) with a published release."""
    return (
        AuditDataset.objects.filter(releases__is_published=True)
        .select_related("official_release")
        .order_by("slug")
        .first()
    )


@dataclass
class Board:
    dataset: AuditDataset
    release: DatasetRelease
    judge: str
    # Every judge with a board on this release (the official one first).
    judges: list[str] = field(default_factory=list)
    # None: the release's whole board; else the board of one phase's runs.
    phase: Phase | None = None
    # The release's phases (for a selector), in time order.
    phases: list[Phase] = field(default_factory=list)

    @property
    def is_official(self) -> bool:
        return self.dataset.official_release_id == self.release.pk and self.judge == official_judge(
            self.dataset, self.judges
        )

    @property
    def label(self) -> str:
        where = f" · phase {self.phase.name}" if self.phase is not None else ""
        return f"{self.release}{where} · judge {self.judge}"


def official_judge(dataset: AuditDataset, judges: list[str]) -> str:
    """The judge maintainers marked official; else the site's default judge where it has a
    board, else the first judge with one."""
    if dataset.official_judge:
        return dataset.official_judge
    default = default_judge_key()
    if default in judges or not judges:
        return default
    return sorted(judges)[0]


def release_judges(release: DatasetRelease) -> list[str]:
    """The judges with a board of ``release``, sorted."""
    # One step down the (release, judge, ...) index per judge, not a DISTINCT: neither SQLite
    # nor PostgreSQL skips ahead for it, so it read every row of the release's boards (4 ms
    # at 100,000 rows, on every board page and the home page).
    table = connection.ops.quote_name(AuditBoardRow._meta.db_table)
    sql = f"""
        WITH RECURSIVE judges(judge) AS (
            SELECT MIN(judge) FROM {table} WHERE release_id = %s
            UNION ALL
            SELECT (SELECT MIN(judge) FROM {table} WHERE release_id = %s AND judge > judges.judge)
            FROM judges WHERE judges.judge IS NOT NULL
        )
        SELECT judge FROM judges WHERE judge IS NOT NULL
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [release.pk, release.pk])
        return sorted(judge for (judge,) in cursor.fetchall())


def _choose_judge(
    dataset: AuditDataset, release: DatasetRelease, judge: str | None, judges: list[str]
) -> str:
    if not judge:
        return official_judge(dataset, judges)
    if judge in judges or judge == official_judge(dataset, judges):
        return judge
    prefixed = [j for j in judges if j.startswith(f"{judge}:")]
    if len(prefixed) == 1:
        return prefixed[0]
    known = ", ".join(judges) or "none yet"
    raise BoardNotFound(f"judge: no board of {release} for judge {judge!r}; boards: {known}")


def resolve_board(
    *,
    dataset: str | None = None,
    release: int | str | None = None,
    judge: str | None = None,
    phase: str | None = None,
) -> Board | None:
    """The board asked for; the official release and judge where they are not given, and the
    release's whole board (all phases) unless ``phase`` (a phase slug) is given.

    ``None`` when no dataset has a published release yet and none was asked for. Raises
    :class:`BoardNotFound` for an unknown dataset, release, judge or phase.
    """
    if dataset:
        found = AuditDataset.objects.select_related("official_release").filter(slug=dataset)
        chosen = found.first()
        if chosen is None:
            raise BoardNotFound(f"dataset: no dataset {dataset!r}")
    else:
        chosen = default_dataset()
        if chosen is None:
            if release is not None:
                raise BoardNotFound("dataset: give the dataset of the release (dataset=SLUG)")
            return None
    if release is not None and release != "":
        text = str(release).strip().rpartition("@")[2]
        number = whole_number(text)
        if number is None:
            raise BoardNotFound(f"release: {release!r} is not a release number")
        picked = chosen.releases.filter(number=number).first()
        if picked is None or not picked.is_published:
            raise BoardNotFound(f"release: {chosen.slug} has no published release {text}")
    else:
        picked = published_release(chosen)
        if picked is None:
            raise BoardNotFound(f"release: {chosen.slug} has no published release yet")
    judges = release_judges(picked)
    key = _choose_judge(chosen, picked, judge, judges)
    official = official_judge(chosen, judges)
    ordered = [official] + [j for j in judges if j != official]
    phases = list(Phase.objects.filter(release=picked).order_by("starts_at", "pk"))
    picked_phase = None
    if phase:
        picked_phase = next((p for p in phases if p.slug == phase), None)
        if picked_phase is None:
            known = ", ".join(p.slug for p in phases) or "none"
            raise BoardNotFound(f"phase: {picked} has no phase {phase!r}; its phases: {known}")
    return Board(
        dataset=chosen,
        release=picked,
        judge=key,
        judges=ordered,
        phase=picked_phase,
        phases=phases,
    )


def _row(row: AuditBoardRow) -> dict[str, Any]:
    ci = [row.ci_low, row.ci_high] if row.ci_low is not None and row.ci_high is not None else None
    return {
        "scanner": row.scanner.name,
        "scanner_id": row.scanner_id,
        "is_baseline": row.scanner.is_baseline,
        "rank": row.rank,
        "rank_low": row.rank_low,
        "rank_high": row.rank_high,
        "rank_range": (
            f"{row.rank_low}-{row.rank_high}"
            if row.rank_low is not None and row.rank_low != row.rank_high
            else (str(row.rank_low) if row.rank_low is not None else "")
        ),
        "complete": row.is_complete,
        "is_complete": row.is_complete,
        "repos_evaluated": row.repos_evaluated,
        "repos_total": row.repos_total,
        "repos": row.repos_evaluated,
        "coverage": f"{row.repos_evaluated}/{row.repos_total}",
        "run_ids": list(row.run_ids),
        # The entry's method (name, description, link), stored with the metrics by the
        # refresh from the run that stands for the scanner.
        "method_name": "",
        "method_description": "",
        "method_url": "",
        **row.metrics,
        "f1_with_partial_ci": ci,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "tied_with_above": row.tied_with_above,
        # The keys probe and checklist rows have too.
        "tied": row.tied_with_above,
        "phase": row.phase.slug if row.phase_id is not None and row.phase else None,
        # The run that stands for the scanner (the latest when several runs cover its repos).
        "run_id": max(row.run_ids) if row.run_ids else None,
        "id": row.pk,
        "board": f"audit:{row.release_id}:{row.phase_id or '-'}:{row.judge}",
        **paired_fields(row),
    }


def board_row(row: AuditBoardRow) -> dict[str, Any]:
    """A stored row as the site and the API show it (its scanner must be selected with it)."""
    return _row(row)


def board_row_queryset(board: Board, *, user: Any = None, everyone: bool = False) -> QuerySet[Any]:
    """The stored rows of ``board`` that ``user`` may see (unordered; the scanner selected).

    A hidden, unrevealed phase's board: staff see every row, a signed-in participant the rows
    of their own scanners, anybody else none. ``everyone``: no such filter (commands).
    """
    rows = (
        AuditBoardRow.objects.on_phase(board.phase)
        .filter(release=board.release, judge=board.judge)
        .select_related("scanner", "phase")
    )
    if everyone or phase_board_visible(board.phase, user):
        return rows
    if getattr(user, "is_authenticated", False):
        return rows.filter(scanner__owner=user)
    return rows.none()


def board_is_restricted(board: Board | None, user: Any = None) -> bool:
    """Whether ``user`` sees only part of ``board`` (a hidden phase not yet revealed)."""
    return board is not None and not phase_board_visible(board.phase, user)


def board_rows(board: Board, *, user: Any = None, everyone: bool = False) -> list[dict[str, Any]]:
    """Every row of the board ``user`` may see, in its order: ranked rows, then incomplete
    ones (one query)."""
    rows = board_row_queryset(board, user=user, everyone=everyone).order_by(*own_order(AUDIT_SHAPE))
    return [_row(r) for r in attach_marks(AUDIT_SHAPE, list(rows))]


def public_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row with exactly the documented keys (:data:`PUBLIC_ROW_KEYS`), in that order."""
    return {key: row.get(key) for key in PUBLIC_ROW_KEYS}


def board_document(
    board: Board | None, *, user: Any = None, everyone: bool = True
) -> dict[str, Any]:
    """What ``audit_leaderboard --format json`` prints: the board's identity and rows."""
    if board is None:
        return {"dataset": None, "release": None, "judge": None, "rows": []}
    document: dict[str, Any] = {
        "dataset": board.dataset.slug,
        "release": board.release.number,
        "judge": board.judge,
    }
    if board.phase is not None:
        document["phase"] = board.phase.slug
    document["rows"] = [
        {**public_row(r), **{k: r[k] for k in PAIRED_ROW_KEYS}}
        for r in board_rows(board, user=user, everyone=everyone)
    ]
    return document


def audit_leaderboard(
    *, dataset: str | None = None, release: int | str | None = None, judge: str | None = None
) -> list[dict[str, Any]]:
    """The rows of a board (by default the official one); ``[]`` when there is none yet."""
    board = resolve_board(dataset=dataset, release=release, judge=judge)
    return board_rows(board) if board is not None else []


def audit_boards() -> list[dict[str, Any]]:
    """Every board with rows: dataset, release, judge, whether it is the official one."""
    counted = (
        AuditBoardRow.objects.on_phase(None)
        .values("release_id", "judge")
        .order_by()
        .annotate(rows=Count("pk"))
    )
    releases = DatasetRelease.objects.select_related("dataset").in_bulk(
        {c["release_id"] for c in counted}
    )
    judges: dict[int, list[str]] = {}
    for c in counted:
        judges.setdefault(c["release_id"], []).append(c["judge"])
    out = []
    for c in sorted(counted, key=lambda c: (str(releases[c["release_id"]]), c["judge"])):
        release = releases[c["release_id"]]
        official = official_judge(release.dataset, sorted(judges[release.pk]))
        out.append(
            {
                "dataset": release.dataset.slug,
                "release": release.number,
                "judge": c["judge"],
                "rows": c["rows"],
                "official": release.dataset.official_release_id == release.pk
                and c["judge"] == official,
            }
        )
    return out


# Ordering name (the API's ``?ordering=``, the page's ``?sort=``) → the stored row's column.
AUDIT_ORDERING_COLUMNS: dict[str, Any] = {
    "scanner": Lower("scanner__name"),
    "rank": Ordered(AUDIT_SHAPE.order[:-1], fixed=1),
    "rank_low": Reversed("span_high"),
    "rank_high": Reversed("span_low"),
    "complete": F("is_complete"),
    "repos_evaluated": F("repos_evaluated"),
    "repos_total": F("repos_total"),
    # Columns of their own (indexed), not keys of the metrics document.
    **{k: F(k) for k in ("tp", "partial", "fp", "fn", "precision", "recall", "f1")},
    "f1_with_partial": F("f1_with_partial"),
}
assert list(AUDIT_ORDERING_COLUMNS) == [k for k in PUBLIC_ROW_KEYS if k != "f1_with_partial_ci"]


def own_scanner_ids(user: Any) -> set[int]:
    """The ids of ``user``'s own scanners ("you are here" on the boards); none for an
    anonymous reader."""
    if not getattr(user, "is_authenticated", False):
        return set()
    return set(Scanner.objects.filter(owner=user).values_list("pk", flat=True))
