"""One reading of a board's places, and the compare page.

Every board shows one "Rank range" and one "Tied" column (:func:`board_mark_columns`): the
paired rule's marks (:mod:`scoring.stats.paired`: Holm-corrected over the pairs the board
tests, an exact test where few items differ) where they were computed, else the interval
overlap's, the latter marked ``°``. :func:`mark_legend` says which, in one line under the
board, with the number of pairs compared. Orderings fixed by a benchmark's rule (a checklist
genuine-only entry, S = 0) are marked "below by rule". Downloads keep the separate readings
under their former keys (``overlap_…`` for the interval overlap, ``paired_…``).

``/boards/compare/?board=KEY&row=ID&row=ID`` (the boards' "Compare" form; ``a=ID&b=ID`` as
the API) shows the paired difference of two entries of one board, in the board's own metric
and units, with the distribution of the resampled differences; an entry the reader may not
see is a 404, as if absent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse

from benchmarks_app.formatting import (
    TIED_MARK,
    format_fixed,
    interval_text,
    percent_interval_text,
    rank_range_text,
    whole_number,
)
from benchmarks_app.selectors.board_marks import attach_marks
from benchmarks_app.selectors.paired import (
    SHAPES,
    BadBoardKey,
    BoardKey,
    EntryNotFound,
    NotComparable,
    paired_compare,
    paired_pending,
    paired_summary,
    rule_fixed_order,
    visible_board_row,
)
from benchmarks_app.selectors.phases import phase_board_visible
from benchmarks_app.services.paired import PAIRED_MAX_ROWS
from benchmarks_app.views.forest import difference_svg
from benchmarks_app.views.tables import Column

OVERLAP_MARK = "°"
RULE_MARK = "below by rule"


@dataclass(frozen=True)
class BoardMetric:
    """How a board kind names its ranking metric, its unit and its entries."""

    label: str
    percent: bool
    entry: str
    entries: str


METRICS = {
    "audit": BoardMetric("F1+", True, "scanner", "scanners"),
    "probes": BoardMetric("Resilience index", False, "model", "models"),
    "checklist": BoardMetric("S", False, "entry", "entries"),
}


def _paired(row: Any) -> bool:
    return row.get("paired_rank_low") is not None


def board_mark_columns(
    noun: str,
    *,
    tie_key: str = "tied",
    rule_fixed: Callable[[Any], bool] | None = None,
) -> list[Column]:
    """The board's one rank range and one tie column, plus the download-only readings.

    ``tie_key``: the row's interval-overlap tie flag; ``rule_fixed``: whether a row's place
    is fixed by the benchmark's rule (its tie cell then says so)."""

    def ranks(row: Any) -> str | None:
        if _paired(row):
            return rank_range_text(row["paired_rank_low"], row["paired_rank_high"])
        text = rank_range_text(row.get("rank_low"), row.get("rank_high"))
        return f"{text} {OVERLAP_MARK}" if text else None

    def tie(row: Any) -> str:
        if rule_fixed is not None and rule_fixed(row):
            return RULE_MARK
        if _paired(row):
            return TIED_MARK if row.get("paired_tied") else ""
        if row.get("rank_low") is None:
            return ""
        return f"{TIED_MARK} {OVERLAP_MARK}" if row.get(tie_key) else ""

    def paired_span(row: Any) -> str | None:
        if not _paired(row):
            return None
        return rank_range_text(row["paired_rank_low"], row["paired_rank_high"])

    return [
        Column(
            "rank_range",
            "Rank range",
            sortable=False,
            value=ranks,
            title=f"The places the {noun[:-1] if noun.endswith('s') else noun} could hold: "
            f"from 1 + the {noun} significantly better to those not significantly worse, by "
            "the paired rule (Holm-corrected over the pairs compared; an exact test where "
            f"few items differ). {OVERLAP_MARK}: by interval overlap instead (the paired "
            "rule not computed for this row yet)",
        ),
        Column(
            "tied",
            "Tied",
            sortable=False,
            value=tie,
            title="≈ tied: not significantly different from the row above, by the same "
            f"reading as the rank range. {RULE_MARK}: placed by the benchmark's rule, not by "
            "its interval",
        ),
        Column(
            "overlap_rank_range",
            "Rank range (interval overlap)",
            sortable=False,
            value=lambda row: rank_range_text(row.get("rank_low"), row.get("rank_high")),
            page=False,
        ),
        Column(
            "overlap_tied",
            "Tied (interval overlap)",
            sortable=False,
            value=lambda row: bool(row.get(tie_key)) if row.get("rank_low") is not None else None,
            page=False,
        ),
        Column("paired_range", "Paired ranks", sortable=False, value=paired_span, page=False),
        Column(
            "paired_tied",
            "Paired tie",
            sortable=False,
            value=lambda row: row.get("paired_tied") if _paired(row) else None,
            page=False,
        ),
    ]


BOARD_MARK_KEYS = (
    "rank_range",
    "tied",
    "overlap_rank_range",
    "overlap_tied",
    "paired_range",
    "paired_tied",
)


def mark_legend(rows: Sequence[Any], *, noun: str) -> str:
    """One line saying how the rank ranges and ties of ``rows`` (one board's row dicts) were
    read: the paired rule with its number of pairs and correction, interval overlap, or
    both; "" without ranked rows."""
    placed = [r for r in rows if r.get("rank_low") is not None or _paired(r)]
    if not placed:
        return ""
    paired = [r for r in placed if _paired(r)]
    key = next((r.get("board") for r in rows if r.get("board")), None)
    summary = None
    if paired and key:
        try:
            summary = paired_summary(BoardKey.parse(str(key)))
        except BadBoardKey:
            summary = None
    overlap = (
        f"{OVERLAP_MARK} marks a row read by interval overlap (its 95% interval against the "
        f"others'), as the paired rule covers only a board's first {PAIRED_MAX_ROWS:,} ranked "
        "rows and is recomputed after each run"
    )
    if not paired:
        return (
            "Rank range and Tied read interval overlap: the paired rule has not been computed "
            f"for this board yet ({OVERLAP_MARK} on every row)."
        )
    if summary is not None:
        pairs = f"{summary.tested_pairs:,} pair{'s' if summary.tested_pairs != 1 else ''}"
        exact = ", each also by an exact sign test" if summary.exact_test else ""
        head = (
            f"Rank range and Tied read the paired rule: {pairs} of {noun} whose intervals "
            f"overlap were compared on their shared items{exact}, with Holm's correction for "
            f"comparing {pairs} at once (at most a 5% chance of calling any equal pair "
            f"different); {summary.split_pairs:,} were found different."
        )
    else:
        head = (
            f"Rank range and Tied read the paired rule ({noun} compared on their shared items, "
            "Holm-corrected over the pairs compared)."
        )
    return head + (f" {overlap}." if len(paired) < len(placed) else "")


# --- The compare page ---------------------------------------------------------------------


def _label(kind: str, row: Any) -> str:
    if kind == "audit":
        return str(row.scanner.name)
    if kind == "probes":
        return str(row.model_name)
    return f"{row.team.name} (entry #{row.submission_id})"


def _board_url(key: BoardKey, row: Any) -> str:
    """The board page the two entries are on (the compare page's way back)."""
    if key.kind == "audit":
        release = row.release
        query = (
            f"?dataset={release.dataset.slug}&release={release.number}&judge={key.label}"
            f"{f'&phase={row.phase.slug}' if row.phase_id else ''}"
        )
        return reverse("audit:leaderboard") + query
    if key.kind == "probes":
        phase = f"&phase={row.phase.slug}" if row.phase_id else ""
        return reverse("probes:leaderboard") + f"?suite={row.suite.name}{phase}"
    phase = f"&phase={row.phase.slug}" if row.phase_id else ""
    return reverse("checklist:leaderboard") + f"?challenge={row.challenge.slug}{phase}"


def _ids(request: HttpRequest) -> tuple[int, int]:
    picked = request.GET.getlist("row")
    if picked:
        if len(picked) != 2:
            raise NotComparable(f"row: tick exactly two entries to compare ({len(picked)} ticked)")
        raw = {"a": picked[0], "b": picked[1]}
    else:
        raw = {name: request.GET.get(name) or "" for name in ("a", "b")}
    ids = []
    for name, text in raw.items():
        value = whole_number(text)
        if value is None:
            raise NotComparable(f"{name}: must be a board row id (an integer)")
        ids.append(value)
    if ids[0] == ids[1]:
        raise NotComparable("b: choose two different entries")
    return ids[0], ids[1]


def _amount(value: float, metric: BoardMetric, *, signed: bool = False) -> str:
    """A difference in the board's units: percentage points for a percentage metric."""
    text = (
        f"{format_fixed(100 * value, 1)} percentage points"
        if metric.percent
        else format_fixed(value, 3)
    )
    return f"+{text}" if signed and value > 0 else text


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else format_fixed(value, 3)


def compare_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"error": None, "result": None, "entries": None}
    status = 200
    if request.GET:
        try:
            key = BoardKey.parse(request.GET.get("board") or "")
            a, b = _ids(request)
            rows = []
            for name, pk in (("a", a), ("b", b)):
                row = visible_board_row(key, pk, request.user)
                if row is None:
                    raise EntryNotFound(f"{name}: no entry {pk} on board {key}")
                rows.append(row)
        except (BadBoardKey, NotComparable) as exc:
            context["error"] = str(exc)
            status = 400
        except EntryNotFound as exc:
            # A page of the site, not Django's debug page: the field, and the way back.
            context["error"] = str(exc)
            context["not_found"] = True
            status = 404
        else:
            context.update(_entries(request, key, rows))
            try:
                result = paired_compare(board=key, a=a, b=b, user=request.user)
            except NotComparable as exc:
                # The two entries are still shown side by side, with why no paired
                # difference (entries scored before per-item results were kept, say).
                context["unpaired"] = str(exc).partition(": ")[2] or str(exc)
            else:
                context.update(_result(result, context["metric"], context["names"]))
                context["pending"] = paired_pending(key)
    return render(request, "leaderboards/compare.html", context, status=status)


def _entries(request: HttpRequest, key: BoardKey, rows: list[Any]) -> dict[str, Any]:
    """The two entries as the board shows them: names, values with intervals, rank ranges."""
    # Places only where the reader sees the whole board (a hidden phase's is not).
    placed = all(phase_board_visible(r.phase, request.user) for r in rows)
    if placed:
        rows = attach_marks(SHAPES[key.kind], rows)
    metric = METRICS[key.kind]
    return {
        "key": key,
        "metric": metric,
        "names": [_label(key.kind, r) for r in rows],
        "entries": True,
        "board_url": _board_url(key, rows[0]),
        "value_texts": [_value_text(key.kind, r, metric) for r in rows],
        "board_marks": [_board_marks(r) for r in rows] if placed else [],
        "rule_fixed": rule_fixed_order(key, rows),
    }


def _result(result: dict[str, Any], metric: BoardMetric, names: list[str]) -> dict[str, Any]:
    return {
        "result": result,
        "better": names[0] if result["difference"] > 0 else names[1],
        "difference_text": _amount(result["difference"], metric, signed=True),
        "low_text": _amount(result["low"], metric, signed=True),
        "high_text": _amount(result["high"], metric, signed=True),
        "p_text": _p(result["p_value"]),
        "exact_text": _p(result["exact_p"]),
        "picture": difference_svg(
            result["draws"],
            value=result["difference"],
            low=result["low"],
            high=result["high"],
            percent=metric.percent,
            title=f"Resampled differences of {metric.label}, {names[0]} minus {names[1]}: "
            "the shaded band is the 95% paired interval, the dark line 0",
        ),
    }


def _value_text(kind: str, row: Any, metric: BoardMetric) -> str:
    value = {"audit": "f1_with_partial", "probes": "resilience_index", "checklist": "s"}[kind]
    number = getattr(row, value, None)
    if number is None:
        return "—"
    low, high = row.ci_low, row.ci_high
    shown = f"{format_fixed(100 * number, 1)}%" if metric.percent else format_fixed(number, 3)
    if low is None or high is None:
        return shown
    span = percent_interval_text(low, high) if metric.percent else interval_text(low, high)
    return f"{shown} (95% CI {span})"


def _board_marks(row: Any) -> str:
    """The rank range the board shows for ``row`` (paired where computed)."""
    if row.paired_rank_low is not None:
        return rank_range_text(row.paired_rank_low, row.paired_rank_high) or "—"
    text = rank_range_text(getattr(row, "rank_low", None), getattr(row, "rank_high", None))
    return f"{text} {OVERLAP_MARK}" if text else "not ranked"


urlpatterns = [path("compare/", compare_page, name="board-compare")]
app_name = "boards"
