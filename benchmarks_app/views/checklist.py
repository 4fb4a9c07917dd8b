"""Pages of the paper checklist challenge under /checklist/: the board, a team's entries, a
submission's scores and feedback, and the routes of the namespace. The board's column specs
are in :mod:`checklist_columns`, the submission and team forms in :mod:`checklist_submit`,
the entry and team buttons in :mod:`checklist_actions`."""

from __future__ import annotations

import mimetypes

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from benchmarks_app.models import Challenge, PaperKind, SubmissionStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks
from benchmarks_app.selectors.checklist import (
    QUOTA_RULE,
    checklist_quota,
    checklist_submission_detail,
    team_submissions,
    user_team,
    user_teams,
    visible_paper,
)
from benchmarks_app.selectors.checklist_boards import (
    PHASELESS,
    ChecklistBoardNotFound,
    board_has_phaseless_rows,
    board_row_dict,
    checklist_board,
)
from benchmarks_app.selectors.phases import phase_dates
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.selectors.visibility import is_staff
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    checklist_submission_assess,
    checklist_submission_discard,
)
from benchmarks_app.views.board_tables import BoardReading, BoardTable
from benchmarks_app.views.checklist_actions import (
    submission_choose,
    team_invite_rotate_view,
    team_leave_view,
    team_member_remove_view,
)
from benchmarks_app.views.checklist_columns import (
    BOARD_ORDERING,
    genuine_only_zero,
    leaderboard_columns,
)
from benchmarks_app.views.checklist_submit import request_challenge, submit
from benchmarks_app.views.checklist_submit import team as team_page
from benchmarks_app.views.runs import run_actions

app_name = "checklist"


def leaderboard(request: HttpRequest) -> HttpResponseBase:
    challenge = request_challenge(request)
    if challenge is None and request.GET.get("challenge"):
        raise Http404("No such challenge")
    try:
        board = checklist_board(
            challenge=challenge, phase=request.GET.get("phase") or None, user=request.user
        )
    except ChecklistBoardNotFound as exc:
        raise Http404(str(exc)) from exc
    rows = board.rows()
    my_team = user_team(user=request.user, challenge=challenge) if challenge else None
    phase_part = f"-{board.phase.slug}" if board.phase else ""
    table = BoardTable(
        request,
        rows,
        leaderboard_columns(
            my_team_id=my_team.pk if my_team else None,
            staff=is_staff(request.user),
        ),
        ordering=BOARD_ORDERING,
        row=lambda stored: board_row_dict(stored, board=board),
        shape=CHECKLIST_SHAPE,
        # The whole board (not a hidden one's own row): places follow from a page's offset.
        places_from_offset=board.full,
        whole_board=board.full,
        filename=f"checklist-{challenge.slug}{phase_part}-leaderboard"
        if challenge
        else "checklist-leaderboard",
        table_id="checklist-leaderboard",
        reading=BoardReading(
            noun="entries",
            value_key="s",
            label_key="team",
            mine=(lambda row: row.get("team_id") == my_team.pk) if my_team is not None else None,
            rule_fixed=genuine_only_zero,
        ),
        empty_message=board.hidden_message
        if board.hidden and not board.full
        else "No scored entries yet: submit a genuine paper or a G/A/T triplet to appear here.",
    )
    if (download := table.download()) is not None:
        return download
    # The team's own entry, wherever it is on the board (one query, not the whole board).
    mine = rows.filter(team=my_team).first() if my_team is not None else None
    if mine is not None:
        attach_marks(CHECKLIST_SHAPE, [mine])
    my_row = board_row_dict(mine, board=board) if mine is not None else None
    tabs = [
        {"slug": p.slug, "name": p.name, "dates": phase_dates(p), "hidden": not p.is_revealed}
        for p in board.phases
    ]
    if board.phases and challenge is not None and board_has_phaseless_rows(challenge):
        tabs.insert(0, {"slug": PHASELESS, "name": "Before phases", "dates": "", "hidden": False})
    return render(
        request,
        "checklist/leaderboard.html",
        {
            "challenge": challenge,
            "challenges": Challenge.objects.all(),
            "table": table,
            "my_team": my_team,
            "my_row": my_row,
            "board": board,
            "phase_tabs": tabs,
            "current_phase": board.phase.slug if board.phase else PHASELESS,
        },
    )


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    entries = []
    for team in user_teams(request.user):
        entries.append(
            {
                "team": team,
                "quota": checklist_quota(team=team),
                "submissions": team_submissions(user=request.user, team=team),
            }
        )
    return render(request, "checklist/mine.html", {"entries": entries})


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    detail = checklist_submission_detail(user=request.user, pk=pk)
    if detail is None:
        raise Http404("No such submission")
    kinds = [
        (kind, label, detail.rows.get(kind, []))
        for kind, label in PaperKind.choices
        if kind in detail.rows
    ]
    own = user_team(user=request.user, challenge=detail.submission.challenge)
    can_choose = (
        detail.score is not None
        and detail.submission.status == SubmissionStatus.SCORED
        and own is not None
        and own.pk == detail.submission.team_id
    )
    return render(
        request,
        "checklist/submission_detail.html",
        {
            "detail": detail,
            "submission": detail.submission,
            "kinds": kinds,
            "papers": {p.kind: p for p in detail.papers},
            "can_assess": detail.submission.status == SubmissionStatus.EXTRACTED,
            # Only the team's members choose its board entry, and only among scored ones.
            "can_choose": can_choose,
            # This page is static; the run page polls, so a queued or running run links there.
            "run_active": detail.run is not None and detail.run.status in ACTIVE_STATUSES,
            "word_cap": settings.CHECKLIST_BODY_WORD_CAP,
            "causes": ended_run_failure_causes(run=detail.run) if detail.run else [],
            "actions": run_actions(request, detail.run) if detail.run else None,
        },
    )


@require_POST
def submission_assess(request: HttpRequest, pk: int) -> HttpResponse:
    detail = checklist_submission_detail(user=request.user, pk=pk)
    if detail is None or not request.user.is_authenticated:
        raise Http404("No such submission")
    try:
        checklist_submission_assess(submission=detail.submission, user=request.user)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Assessment queued.")
    return redirect("checklist:submission-detail", pk=pk)


@require_http_methods(["GET", "POST"])
def submission_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    """Withdrawing deletes the papers' files: the page asks first (GET, or a POST without
    ``confirm``), and only a POST with ``confirm`` withdraws."""
    detail = checklist_submission_detail(user=request.user, pk=pk)
    if detail is None or not request.user.is_authenticated:
        raise Http404("No such submission")
    if request.method != "POST" or request.POST.get("confirm") != "1":
        return render(
            request,
            "checklist/withdraw_confirm.html",
            {"submission": detail.submission, "papers": detail.papers, "rule": QUOTA_RULE},
        )
    try:
        checklist_submission_discard(submission=detail.submission)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
        return redirect("checklist:submission-detail", pk=pk)
    messages.success(request, f"Submission #{pk} withdrawn and its files deleted. {QUOTA_RULE}")
    return redirect("checklist:mine")


def paper_download(request: HttpRequest, pk: int) -> FileResponse:
    """Papers are served only here, to the team that submitted them and to staff."""
    paper = visible_paper(user=request.user, pk=pk)
    if paper is None or not paper.file:
        raise Http404("No such paper")
    name = paper.original_name or paper.file.name.rsplit("/", 1)[-1]
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    response = FileResponse(
        paper.file.open("rb"), as_attachment=True, filename=name, content_type=content_type
    )
    response["Cache-Control"] = "private, no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submit/", submit, name="submit"),
    path("mine/", mine, name="mine"),
    path("team/", team_page, name="team"),
    path("submissions/<int:pk>/", submission_detail, name="submission-detail"),
    path("submissions/<int:pk>/assess/", submission_assess, name="submission-assess"),
    path("submissions/<int:pk>/withdraw/", submission_withdraw, name="submission-withdraw"),
    path("papers/<int:pk>/download/", paper_download, name="paper-download"),
    path("submissions/<int:pk>/choose/", submission_choose, name="submission-choose"),
    path("team/leave/", team_leave_view, name="team-leave"),
    path("team/remove/", team_member_remove_view, name="team-member-remove"),
    path("team/invite/rotate/", team_invite_rotate_view, name="team-invite-rotate"),
]
