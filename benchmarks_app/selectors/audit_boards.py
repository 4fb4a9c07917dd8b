"""Audit boards: which board a request means, and its stored rows.

A board is one (dataset release, judge) pair; its rows are written when a run ends
(:mod:`benchmarks_app.services.audit.boards`), so reading one is a constant number of queries.
Without a choice, the dataset's official release and judge are shown (see
:func:`resolve_board`); every answer names the release and judge it is about.

A release with phases (development, final, …) has, besides its whole board (rows with no
phase), one board per phase, of that phase's runs only. A hidden phase's board is for staff
until it is revealed; meanwhile a participant sees only the rows of their own scanners
(:func:`board_row_queryset`). A scanner's owner may choose which of its complete runs stands
for it on a board (``EvaluationRun.board_choice``); otherwise each repo's latest result does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Max, Q, QuerySet
from django.db.models.functions import Lower

from benchmarks_app.formatting import whole_number
from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, Phase, Repo
from benchmarks_app.models.audit import AuditBoardRow, AuditDataset, DatasetRelease
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, attach_marks, own_order
from benchmarks_app.selectors.board_ordering import Ordered, Reversed
from benchmarks_app.selectors.paired import paired_fields
from benchmarks_app.selectors.phases import phase_board_visible
from scoring.audit.judges import parse_judge_spec

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


def judge_key(judge: str, judge_config: dict[str, Any] | None) -> str:
    """The board a run of ``judge`` counts on: ``offline``, ``openai:MODEL`` or ``replay:DIR``.

    LLM judges of different models never share a board; a run of a curated judge record
    (other than the default ``offline`` and ``openai``) counts on the board of its name.
    """
    board = (judge_config or {}).get("board")
    if board:
        return str(board)
    try:
        spec = parse_judge_spec(judge)
    except ValueError:
        return judge
    if spec.kind == "openai":
        model = (judge_config or {}).get("model")
        return f"openai:{model}" if model else "openai"
    return spec.label


def board_judge_key(run: EvaluationRun) -> str:
    return judge_key(run.judge, run.judge_config)


def default_judge_key() -> str:
    """The board judge of runs that name no judge (``JUDGE_DEFAULT``)."""
    default = str(getattr(settings, "JUDGE_DEFAULT", "offline") or "offline")
    return judge_key(default, {"model": getattr(settings, "JUDGE_MODEL", "")})


def release_repo_ids(release: DatasetRelease) -> set[int]:
    """The repos a release covers: those frozen with it, and those of its truth findings."""
    ids = set(release.repos.values_list("pk", flat=True))
    ids |= set(release.truth_findings.values_list("repo_id", flat=True))
    return ids


def release_repos(release: DatasetRelease) -> list[Repo]:
    return list(Repo.objects.filter(pk__in=release_repo_ids(release)).order_by("project_id"))


def _board_runs(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> list[EvaluationRun]:
    runs = EvaluationRun.objects.filter(benchmark=Benchmark.AUDIT, release=release)
    if scanner_id is not None:
        runs = runs.filter(scanner_id=scanner_id)
    if phase is not None:
        runs = runs.filter(phase=phase)
    else:
        # The whole board is public: runs of a hidden phase join it once it is revealed.
        runs = runs.filter(
            Q(phase__isnull=True) | Q(phase__is_hidden=False) | Q(phase__revealed_at__isnull=False)
        )
    # Unordered: the runs' default order (newest first) made SQLite walk the run list's
    # index over every run of the benchmark rather than look up one scanner's few runs.
    runs = runs.only("id", "judge", "judge_config", "scanner_id", "board_choice", "phase_id")
    return [run for run in runs.order_by() if board_judge_key(run) == judge]


def board_run_ids(*, release: DatasetRelease, judge: str, phase: Phase | None = None) -> list[int]:
    """The runs a board counts: the release's runs of that judge (of ``phase`` only, if given)."""
    return [run.pk for run in _board_runs(release=release, judge=judge, phase=phase)]


def board_chosen_runs(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> dict[int, int]:
    """Scanner id → the run its owner chose for this board (the latest choice on a whole
    release's board, where each phase may hold one); of one scanner only with ``scanner_id``."""
    chosen: dict[int, int] = {}
    for run in _board_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id):
        if run.board_choice and run.scanner_id is not None:
            chosen[run.scanner_id] = max(run.pk, chosen.get(run.scanner_id, 0))
    return chosen


def board_repo_results(
    *,
    release: DatasetRelease,
    judge: str,
    phase: Phase | None = None,
    scanner_id: int | None = None,
) -> list[AuditRepoResult]:
    """Per scanner and repo of the release, the result the board counts.

    A scanner whose owner chose a run: that run's complete results (the owner chose them,
    even if newer versions were uploaded since). Any other scanner: per repo, the latest
    complete result of the board's runs whose judged version is still the current one.
    With ``scanner_id``, that scanner's results only (what one run's end changes).
    """
    runs = _board_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id)
    chosen = board_chosen_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id)
    repo_ids = release_repo_ids(release)
    others = [r.pk for r in runs if r.scanner_id not in chosen]
    qs = AuditRepoResult.objects.filter(
        run_id__in=others, is_complete=True, repo_id__in=repo_ids
    ).filter(Q(scan_result__isnull=True) | Q(scan_result__is_current=True))
    latest = qs.values("scanner_id", "repo_id").annotate(latest=Max("id")).values("latest")
    picked = AuditRepoResult.objects.filter(
        run_id__in=list(chosen.values()), is_complete=True, repo_id__in=repo_ids
    )
    latest_picked = (
        picked.values("scanner_id", "repo_id").annotate(latest=Max("id")).values("latest")
    )
    return list(
        AuditRepoResult.objects.filter(Q(id__in=latest) | Q(id__in=latest_picked)).order_by(
            "scanner_id", "repo_id"
        )
    )


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
