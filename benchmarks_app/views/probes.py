"""Safety-probe pages: the leaderboard per suite and the report of each scored submission."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path

from benchmarks_app.selectors.probes import (
    ProbeReportNotFound,
    probe_leaderboard,
    probe_report,
    probe_report_page,
)
from scoring.probes.report import report_markdown

app_name = "probes"

# Colour-blind-safe palette (Okabe-Ito), one colour per cluster.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
SVG_W, SVG_H, SVG_PAD = 640, 400, 28


def leaderboard(request: HttpRequest) -> HttpResponse:
    rows = probe_leaderboard(suite_name=request.GET.get("suite") or None, user=request.user)
    suites: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        suites[row["suite"]].append(row)
    return render(
        request,
        "probes/leaderboard.html",
        {"suites": dict(suites), "suite_filter": request.GET.get("suite", "")},
    )


def _scatter(observability: dict[str, Any] | None, cases: list[dict[str, Any]]) -> dict[str, Any]:
    if not observability:
        return {}
    by_id = {c["probe_id"]: c for c in cases}
    inner_w, inner_h = SVG_W - 2 * SVG_PAD, SVG_H - 2 * SVG_PAD
    points = []
    for p in observability["points"]:
        case = by_id.get(p["probe_id"], {})
        points.append(
            {
                "x": round(SVG_PAD + p["scatter_x"] * inner_w, 2),
                "y": round(SVG_H - SVG_PAD - p["scatter_y"] * inner_h, 2),
                "colour": PALETTE[p["cluster"] % len(PALETTE)],
                "cluster": p["cluster"],
                "passed": case.get("passed", True),
                "title": (
                    f"{p['probe_id']} · cluster {p['cluster']} · {case.get('category', '')} · "
                    f"{'pass' if case.get('passed') else 'fail'} · risk "
                    f"{case.get('risk_score', 0):.2f}"
                ),
            }
        )
    legend = [
        {**c, "colour": PALETTE[c["cluster"] % len(PALETTE)]}
        for c in observability["clustering"]["clusters"]
    ]
    return {"points": points, "legend": legend, "width": SVG_W, "height": SVG_H}


def submission(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        data = probe_report_page(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    report = data["report"]
    context: dict[str, Any] = {**data}
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
    response = HttpResponse(report_markdown(report), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="probe-report-{pk}.md"'
    return response


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submissions/<int:pk>/", submission, name="submission"),
    path("submissions/<int:pk>/report.json", report_json, name="report-json"),
    path("submissions/<int:pk>/report.md", report_md, name="report-md"),
]
