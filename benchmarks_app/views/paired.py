"""The paired rule on the board pages: two columns every board shows, and the compare page.

``/boards/compare/?board=KEY&a=ROW&b=ROW`` shows the paired difference of two entries of one
board (the API's ``/api/boards/compare/`` as a page), with the same visibility: an entry the
reader may not see is a 404, as if absent.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from benchmarks_app.formatting import TIED_MARK, rank_range_text, whole_number
from benchmarks_app.selectors.paired import (
    SPECS,
    BadBoardKey,
    BoardKey,
    EntryNotFound,
    NotComparable,
    paired_compare,
    paired_pending,
    visible_board_row,
)
from benchmarks_app.views.tables import Column

PENDING = "…"


def paired_columns(noun: str) -> list[Column]:
    """The paired rank range and tie columns of a board of ``noun`` (entries, models)."""

    def span(row: Any) -> str | None:
        low, high = row.get("paired_rank_low"), row.get("paired_rank_high")
        if low is None:
            return PENDING if row.get("rank_low") is not None else None
        return rank_range_text(low, high)

    def tied(row: Any) -> str:
        if row.get("paired_rank_low") is None:
            return ""
        return TIED_MARK if row.get("paired_tied") else ""

    return [
        Column(
            "paired_range",
            "Paired ranks",
            sortable=False,
            value=span,
            title=f"Ranks by the paired rule: from 1 + the {noun} significantly better by "
            "their paired difference (the same items resampled for both), to those not "
            f"significantly worse. {PENDING}: being computed, read the rank range meanwhile.",
        ),
        Column(
            "paired_tied",
            "Paired tie",
            sortable=False,
            value=tied,
            title="≈ tied: the 95% interval of the paired difference with the row above contains 0",
        ),
    ]


def _label(kind: str, row: Any) -> str:
    if kind == "audit":
        return str(row.scanner.name)
    if kind == "probes":
        return str(row.model_name)
    return str(row.team.name)


def _params(request: HttpRequest) -> tuple[BoardKey, int, int]:
    key = BoardKey.parse(request.GET.get("board") or "")
    ids = []
    for name in ("a", "b"):
        value = whole_number(request.GET.get(name) or "")
        if value is None:
            raise NotComparable(f"{name}: must be a board row id (an integer)")
        ids.append(value)
    return key, ids[0], ids[1]


def compare_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"error": None, "result": None}
    if request.GET:
        try:
            key, a, b = _params(request)
            context["result"] = paired_compare(board=key, a=a, b=b, user=request.user)
        except (BadBoardKey, NotComparable) as exc:
            context["error"] = str(exc)
        except EntryNotFound:
            raise Http404("No such entry on this board") from None
        else:
            rows = [visible_board_row(key, pk, request.user) for pk in (a, b)]
            context.update(
                key=key,
                names=[_label(key.kind, r) for r in rows],
                value_name=SPECS[key.kind].value,
                pending=paired_pending(key),
            )
    status = 400 if context["error"] else 200
    return render(request, "leaderboards/compare.html", context, status=status)


urlpatterns = [path("compare/", compare_page, name="board-compare")]
app_name = "boards"
