"""A scored probe submission's pages: its report (figures, the geometry scatter drawn as SVG,
the worst cases), the owner's choice of the entry that stands for a model, and the report's
JSON and Markdown downloads."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.probe_boards import ProbeReportNotFound
from benchmarks_app.selectors.probes import (
    probe_report,
    probe_report_page,
    probe_submission,
)
from benchmarks_app.services.probes import (
    ProbeChoiceError,
    probe_submission_choose,
)
from benchmarks_app.views.runs import run_actions
from scoring.probes.metrics import board_markdown
from scoring.probes.report import report_markdown

# Okabe-Ito, the colour-blind-safe palette, ordered so that the first clusters get the most
# distinct hues; its yellow, faint on white, comes last.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"]
# The frame of the scatter: room on the left and at the bottom for the axes and their labels.
SVG_W, SVG_H = 960, 440
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 52, 16, 16, 44
FAIL_ARM = 4.5  # half the size of the cross marking a failed case


def _scatter(observability: dict[str, Any] | None, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Points, axes and legend of the geometry scatter, drawn server-side as SVG.

    A passed case is a dot, a failed one a cross, both in its cluster's colour; every mark
    has a tooltip (probe id, category, cluster, pass/fail, risk).
    """
    if not observability:
        return {}
    by_id = {c["probe_id"]: c for c in cases}
    inner_w, inner_h = SVG_W - PAD_LEFT - PAD_RIGHT, SVG_H - PAD_TOP - PAD_BOTTOM
    bottom = SVG_H - PAD_BOTTOM
    points = []
    for p in observability["points"]:
        case = by_id.get(p["probe_id"], {})
        passed = bool(case.get("passed", True))
        x = round(PAD_LEFT + p["scatter_x"] * inner_w, 2)
        y = round(bottom - p["scatter_y"] * inner_h, 2)
        points.append(
            {
                "x": x,
                "y": y,
                "colour": PALETTE[p["cluster"] % len(PALETTE)],
                "cluster": p["cluster"],
                "passed": passed,
                "cross": (
                    f"M{x - FAIL_ARM},{y - FAIL_ARM}L{x + FAIL_ARM},{y + FAIL_ARM}"
                    f"M{x - FAIL_ARM},{y + FAIL_ARM}L{x + FAIL_ARM},{y - FAIL_ARM}"
                ),
                "title": (
                    f"{p['probe_id']} · {case.get('category', '') or 'no category'} · "
                    f"cluster {p['cluster']} · {'pass' if passed else 'FAIL'} · risk "
                    f"{case.get('risk_score', 0):.2f}"
                ),
            }
        )
    ticks = [
        {
            # Two decimals: 0.25 and 0.75 must not read 0.2 and 0.8.
            "value": f"{t:.2f}",
            "x": round(PAD_LEFT + t * inner_w, 2),
            "y": round(bottom - t * inner_h, 2),
        }
        for t in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    legend = [
        {**c, "colour": PALETTE[c["cluster"] % len(PALETTE)]}
        for c in observability["clustering"]["clusters"]
    ]
    return {
        "points": points,
        "legend": legend,
        "width": SVG_W,
        "height": SVG_H,
        "left": PAD_LEFT,
        "right": SVG_W - PAD_RIGHT,
        "top": PAD_TOP,
        "bottom": bottom,
        "ticks": ticks,
        "x_label": {"x": PAD_LEFT + inner_w / 2, "y": SVG_H - 8},
        "y_label": {"x": 14, "y": PAD_TOP + inner_h / 2},
        "failed": sum(1 for p in points if not p["passed"]),
    }


def submission(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        data = probe_report_page(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    report = data["report"]
    entry = data["submission"]
    runs = data["runs"]
    context: dict[str, Any] = {
        **data,
        # The run this page follows live until its report appears.
        "live_run": runs[0] if not report and runs and runs[0].status in ACTIVE_STATUSES else None,
        # The latest run's waiting reason, cost, cancel/resume and bundle (runs/_actions.html).
        "actions": run_actions(request, runs[0]) if runs else None,
        "can_choose": bool(
            report
            and not entry.board_choice
            and request.user.is_authenticated
            and (entry.owner_id == request.user.pk or request.user.is_staff)
        ),
    }
    if report:
        metrics = report["metrics"]
        histogram = metrics["failure_mode_histogram"]
        top = max(histogram.values(), default=0)
        context.update(
            metrics=metrics,
            overall=metrics["overall"],
            histogram=[
                {"mode": k, "count": v, "pct": round(100 * v / top, 1) if top else 0}
                for k, v in histogram.items()
            ],
            scatter=_scatter(report["observability"], report["cases"]),
            observability=report["observability"],
            agreement=report["agreement"],
            ranked_categories=[
                {
                    "category": r["category"],
                    **metrics["by_category"][r["category"]],
                    "agreement": ((report["agreement"] or {}).get("by_category") or {}).get(
                        r["category"]
                    ),
                }
                for r in metrics["category_ranking"]
            ],
        )
    return render(request, "probes/submission.html", context)


@login_required
def choose(request: HttpRequest, pk: int) -> HttpResponse:
    if request.method != "POST":
        return redirect("probes:submission", pk=pk)
    try:
        entry = probe_submission(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    try:
        probe_submission_choose(user=request.user, submission=entry)
    except ProbeChoiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"Submission #{entry.pk} now represents {entry.model_name} on its boards."
        )
    return redirect("probes:submission", pk=pk)


def report_json(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        report = probe_report(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    response = JsonResponse(report, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="probe-report-{pk}.json"'
    return response


def report_md(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        report = probe_report(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    text = report_markdown(report) + "\n" + board_markdown(report)
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="probe-report-{pk}.md"'
    return response
