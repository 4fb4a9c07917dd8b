"""Run pages: the list, one page per run with live progress, and one's own submissions."""

from __future__ import annotations

import math
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from rest_framework.request import Request
from rest_framework.views import APIView

from benchmarks_app.api.throttling import AnonThrottle, UserThrottle
from benchmarks_app.models import Benchmark, EvaluationRun, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.board_ordering import KeysFirstPaginator
from benchmarks_app.selectors.checklist import checklist_run_votes
from benchmarks_app.selectors.leaderboards import OwnSubmission, own_submissions
from benchmarks_app.selectors.run_bundles import RunBundleError, run_bundle_name
from benchmarks_app.selectors.run_health import (
    pieces_not_picked_up,
    run_is_stuck,
    run_waiting_reason,
    stuck_after_s,
)
from benchmarks_app.selectors.runs import (
    ended_run_failure_causes,
    run_failed_items,
    run_judge_usage,
    run_resume_blocker,
)
from benchmarks_app.selectors.visibility import is_staff, visible_runs
from benchmarks_app.services.run_bundles import run_bundle_fetch
from benchmarks_app.services.runs import (
    CANCELLABLE,
    RunNotResumable,
    run_cancel,
    run_resume,
)
from scoring.judges.failures import FailureCause

# A failed run's page lists this many of its failed items; the rest are counted.
FAILED_ITEMS_SHOWN = 20

app_name = "runs"

ACTIVE = ACTIVE_STATUSES

# Where a run's results are shown, per benchmark: (route name, attribute giving its argument).
# The first route that exists wins, so a benchmark can add its page later without changes here.
RESULT_ROUTES: dict[str, list[tuple[str, str]]] = {
    Benchmark.AUDIT: [("audit:run", "pk"), ("audit:run-detail", "pk")],
    Benchmark.PROBES: [
        ("probes:submission", "probe_submission_id"),
        ("probes:submission-detail", "probe_submission_id"),
    ],
    Benchmark.CHECKLIST: [
        ("checklist:submission", "checklist_submission_id"),
        ("checklist:submission-detail", "checklist_submission_id"),
    ],
}

# Where an own submission is shown: (route name, which field of the row is its argument).
SUBMISSION_ROUTES: dict[str, list[tuple[str, str]]] = {
    Benchmark.AUDIT: [("audit:scanner", "label")],  # scanner pages are keyed by name
    Benchmark.PROBES: [("probes:submission", "id"), ("probes:submission-detail", "id")],
    Benchmark.CHECKLIST: [
        ("checklist:submission", "id"),
        ("checklist:submission-detail", "id"),
    ],
}


def _first_route(candidates: list[tuple[str, Any]]) -> str | None:
    for name, arg in candidates:
        if arg is None:
            continue
        try:
            return reverse(name, args=[arg])
        except NoReverseMatch:
            continue
    return None


def result_url(run: EvaluationRun) -> str | None:
    """The benchmark page showing this run's results, when that page exists."""
    routes = RESULT_ROUTES.get(run.benchmark, [])
    return _first_route([(name, getattr(run, attr, None)) for name, attr in routes])


def submission_url(row: OwnSubmission) -> str | None:
    routes = SUBMISSION_ROUTES.get(row.benchmark, [])
    return _first_route([(name, getattr(row, field)) for name, field in routes])


def status_payload(
    run: EvaluationRun, *, causes: list[FailureCause] | None = None
) -> dict[str, Any]:
    """What the run page polls: enough to redraw the badge, the bar and the timing."""
    causes = ended_run_failure_causes(run=run) if causes is None else causes
    waiting = run_waiting_reason(run)
    return {
        "id": run.pk,
        "status": run.status,
        "status_label": run.get_status_display(),
        "is_active": run.status in ACTIVE,
        "progress_done": run.progress_done,
        "progress_total": run.progress_total,
        "progress_percent": round(run.progress_percent, 1),
        "failed_items": run.failed_items,
        "attempts": run.attempts,
        "is_complete": run.is_complete,
        "error": run.error,
        "failure_causes": [c.as_dict() for c in causes],
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "duration_s": round(run.duration_s, 1) if run.duration_s is not None else None,
        "result_url": result_url(run),
        # Why it waits, one line (run_waiting_reason): null unless it waits.
        "waiting": waiting.as_dict() if waiting is not None else None,
    }


def run_list(request: HttpRequest) -> HttpResponse:
    runs = visible_runs(request.user).order_by("-created_at", "-id")
    benchmark = request.GET.get("benchmark", "")
    status = request.GET.get("status", "")
    if benchmark in Benchmark.values:
        runs = runs.filter(benchmark=benchmark)
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    # Keys first: a deep page steps over index entries, not runs and their joins.
    page = KeysFirstPaginator(runs, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/list.html",
        {
            "page": page,
            "benchmarks": Benchmark.choices,
            "statuses": RunStatus.choices,
            "benchmark": benchmark,
            "status": status,
        },
    )


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(visible_runs(request.user).prefetch_related("repos"), pk=pk)
    causes = ended_run_failure_causes(run=run)
    failed = run_failed_items(run=run) if run.status == RunStatus.FAILED else []
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "status": status_payload(run, causes=causes),
            "is_active": run.status in ACTIVE,
            "causes": causes,
            "failed": failed[:FAILED_ITEMS_SHOWN],
            "failed_more": max(0, len(failed) - FAILED_ITEMS_SHOWN),
            "resume_blocker": run_resume_blocker(run) if failed else "",
            **run_health_flags(run, active=run.status in ACTIVE),
            "usage": run_judge_usage(run=run),
            "votes": checklist_run_votes(run=run),
            "actions": run_actions(request, run, here=True),
        },
    )


# A run's creator may resume it from these states (the service also takes stalled ones).
RESUMABLE = (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.WAITING)


def run_actions(request: HttpRequest, run: EvaluationRun, *, here: bool = False) -> dict[str, Any]:
    """What ``runs/_actions.html`` shows on every page a run lands on (``/runs/N/``, the
    audit run page, the probe and checklist submission pages): why it waits, its judge's
    cost, cancel and resume for its creator and staff, the bundle once it has ended, and a
    link to ``/runs/N/`` (``here``: on that page itself, none)."""
    active = run.status in ACTIVE
    mine = may_cancel(request.user, run)
    # (A stalled run, active with nobody on it, is resumed by an operator: the admin's action.)
    resumable = mine and run.status in RESUMABLE
    blocker = run_resume_blocker(run) if resumable else ""
    return {
        "run": run,
        "here": here,
        "active": active,
        "waiting": run_waiting_reason(run),
        "usage": run_judge_usage(run=run),
        "can_cancel": mine and run.status in CANCELLABLE,
        "can_resume": resumable and not blocker,
        "resume_blocker": blocker,
        "next": request.get_full_path(),
    }


def bundle_response(run: EvaluationRun, viewer: Any) -> HttpResponse:
    """The run's bundle as ``viewer`` may have it, as a download (shared with
    ``/api/runs/<id>/bundle/``): built once per variant, then read from storage."""
    response = HttpResponse(
        run_bundle_fetch(run=run, viewer=viewer), content_type="application/zip"
    )
    response["Content-Disposition"] = f'attachment; filename="{run_bundle_name(run)}"'
    return response


def _throttled(request: HttpRequest) -> HttpResponse | None:
    """A 429 once the client is past the API's rates (the same throttles and counters as
    ``/api/runs/<id>/bundle/``), else None."""
    api_request = Request(request)
    api_request.user = request.user
    for throttle in (AnonThrottle(), UserThrottle()):
        if not throttle.allow_request(api_request, APIView()):
            wait = throttle.wait()
            response = HttpResponse(
                "Too many downloads; try again later.",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            if wait is not None:
                response["Retry-After"] = str(max(1, math.ceil(wait)))
            return response
    return None


@never_cache
def run_bundle_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Who may see the run may download its bundle; hidden truth is never in it, and a
    participant's inputs only as the run's phase publishes them (its owner gets them all)."""
    refused = _throttled(request)
    if refused is not None:
        return refused
    run = get_object_or_404(visible_runs(request.user), pk=pk)
    try:
        return bundle_response(run, request.user)
    except RunBundleError as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")


def may_cancel(user: Any, run: EvaluationRun) -> bool:
    """The run's creator and staff may cancel it (as through the API)."""
    return bool(user.is_authenticated and (is_staff(user) or run.created_by_id == user.pk))


@require_POST
def run_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    if not request.user.is_authenticated:
        raise PermissionDenied("Sign in as the run's creator to cancel it.")
    run = get_object_or_404(visible_runs(request.user), pk=pk)
    if not may_cancel(request.user, run):
        raise PermissionDenied("Only the run's creator or staff may cancel it.")
    if run.status in CANCELLABLE:
        run = run_cancel(run=run)
    if run.status == RunStatus.CANCELLED:
        messages.success(
            request,
            f"Run #{run.pk} cancelled: its workers stop between judge calls; what was judged "
            "is kept, and a resume judges only what is missing.",
        )
    else:
        messages.error(
            request, f"Run #{run.pk} is {run.get_status_display().lower()}: too late to cancel."
        )
    return _back(request, run)


def _back(request: HttpRequest, run: EvaluationRun) -> HttpResponse:
    """Back to the page the button was on (``next``, a path of this site), else /runs/N/."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("runs:detail", pk=run.pk)


@require_POST
def run_resume_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a failed, cancelled or paused run again: its creator or staff (what was judged is
    kept; only what is missing is judged)."""
    if not request.user.is_authenticated:
        raise PermissionDenied("Sign in as the run's creator to resume it.")
    run = get_object_or_404(visible_runs(request.user), pk=pk)
    if not may_cancel(request.user, run):
        raise PermissionDenied("Only the run's creator or staff may resume it.")
    try:
        run = run_resume(run=run)
    except RunNotResumable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run #{run.pk} queued again: only what is missing is judged.")
    return _back(request, run)


def run_health_flags(run: EvaluationRun, *, active: bool) -> dict[str, Any]:
    """What an active run's page warns about: stuck past RUN_STUCK_AFTER_S, pieces that no
    worker has picked up."""
    if not active:
        return {"stuck_after_s": 0, "unpicked": []}
    return {
        "stuck_after_s": int(stuck_after_s()) if run_is_stuck(run) else 0,
        "unpicked": pieces_not_picked_up(run),
    }


@never_cache
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    try:
        run = visible_runs(request.user).get(pk=pk)
    except EvaluationRun.DoesNotExist as exc:
        raise Http404("No such run.") from exc
    return JsonResponse(status_payload(run))


@login_required
def my_submissions(request: HttpRequest) -> HttpResponse:
    benchmark = request.GET.get("benchmark", "")
    rows = own_submissions(request.user, benchmark=benchmark or None)
    items = [
        {
            "row": row,
            "url": submission_url(row),
            "run_url": reverse("runs:detail", args=[row.run_id]) if row.run_id else None,
            "percent": (100.0 * row.progress_done / row.progress_total)
            if row.progress_total
            else 0.0,
            "benchmark_label": Benchmark(row.benchmark).label,
        }
        for row in rows
    ]
    return render(
        request,
        "runs/mine.html",
        {"items": items, "benchmarks": Benchmark.choices, "benchmark": benchmark},
    )


urlpatterns = [
    path("", run_list, name="list"),
    path("mine/", my_submissions, name="mine"),
    path("<int:pk>/", run_detail, name="detail"),
    path("<int:pk>/status/", run_status, name="status"),
    path("<int:pk>/cancel/", run_cancel_view, name="cancel"),
    path("<int:pk>/resume/", run_resume_view, name="resume"),
    path("<int:pk>/bundle/", run_bundle_view, name="bundle"),
]
