"""Pages of the paper checklist challenge under /checklist/."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Value
from django.db.models.functions import Lower, NullIf
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods, require_POST

from benchmarks_app.formatting import TIED_MARK, interval_text, rank_range_text
from benchmarks_app.models import Challenge, PaperKind, SubmissionStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks
from benchmarks_app.selectors.checklist import (
    QUOTA_RULE,
    checklist_quota,
    checklist_submission_detail,
    default_challenge,
    my_team,
    quota_phase,
    team_submissions,
    user_team,
    user_teams,
    visible_paper,
)
from benchmarks_app.selectors.checklist_boards import (
    ORDERING_COLUMNS,
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
    PaperUpload,
    checklist_submission_assess,
    checklist_submission_create,
    checklist_submission_discard,
    read_upload,
    team_create,
    team_join,
)
from benchmarks_app.views.board_tables import BoardTable
from benchmarks_app.views.checklist_actions import (
    submission_choose,
    team_invite_rotate_view,
    team_leave_view,
    team_member_remove_view,
)
from benchmarks_app.views.entry_fields import method_fields
from benchmarks_app.views.paired import paired_columns
from benchmarks_app.views.tables import Column, row_url
from benchmarks_app.views.upload_fields import UploadField

app_name = "checklist"

ACCEPT = ".pdf,.tex,.zip"


class SubmissionForm(forms.Form):
    genuine = UploadField(
        label="Genuine paper (G)",
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="PDF, .tex, or .zip of LaTeX sources with a main .tex.",
    )
    adversarial = UploadField(
        label="Adversarial paper (A)",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="Planted errors and deceptive answers. Give A and T together, or neither.",
    )
    truth = UploadField(
        label="Truth-adversarial paper (T)",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="The same paper as A with truthful answers explaining the planted errors.",
    )
    label = forms.CharField(label="Label (optional)", required=False, max_length=200)
    method_name, method_description, method_url = method_fields()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        has_a, has_t = bool(data.get("adversarial")), bool(data.get("truth"))
        if has_a and not has_t:
            self.add_error(
                "truth", "A needs its T paper: submit G alone, or the full G/A/T triplet."
            )
        if has_t and not has_a:
            self.add_error(
                "adversarial", "T needs its A paper: submit G alone, or the full G/A/T triplet."
            )
        return data


class TeamCreateForm(forms.Form):
    name = forms.CharField(label="Team name", max_length=100)


class TeamJoinForm(forms.Form):
    invite_code = forms.CharField(
        label="Invite code", max_length=32, help_text="Ask a member of the team for it."
    )


def _challenge(request: HttpRequest) -> Challenge | None:
    return default_challenge(request.GET.get("challenge") or None)


@dataclass(frozen=True)
class EntryColumn(Column):
    """The submission id, shown as ``#12``; downloads keep the number."""

    def display(self, value: Any) -> str:
        return f"#{value}" if value is not None else super().display(value)


@dataclass(frozen=True)
class KindColumn(Column):
    """``G`` / ``GAT`` shown by their labels; downloads keep the code."""

    def display(self, value: Any) -> str:
        return {"G": "G only", "GAT": "G/A/T"}.get(value, super().display(value))


BASELINE_BADGE = "baseline"


def leaderboard_columns(*, my_team_id: int | None, staff: bool) -> list[Column]:
    """Columns of the leaderboard; an entry links to its page only for its team and staff
    (the page shows per-question feedback, which other teams must not see)."""

    def entry_link(row: Any) -> str | None:
        if staff or (my_team_id is not None and row["team_id"] == my_team_id):
            return row_url("checklist:submission-detail", row["submission"])
        return None

    # Rank, team and S come first, so that on a phone they stay in view while the other
    # columns scroll (site.css, ``table.board``).
    return [
        Column("team", "Team"),
        Column("s", "S", kind="float", title="Overall score: C_G · C_A · (1 - R) · C_T"),
        Column(
            "is_baseline",
            "Baseline",
            sortable=False,
            value=lambda row: BASELINE_BADGE if row["is_baseline"] else "",
            title="A reference entrant of the organizers, ranked like any team",
        ),
        Column(
            "method_name",
            "Method",
            link=lambda row: row["method_url"] or None,
            title="The method behind the entry, as the team described it",
        ),
        EntryColumn("submission", "Entry", link=entry_link),
        KindColumn("kind", "Papers", title="G only: a genuine paper; G/A/T: a full triplet"),
        Column("c_g", "C_G", kind="float", title="Correctness on the genuine paper"),
        Column("c_a", "C_A", kind="float", title="Correctness on the adversarial paper"),
        Column("c_t", "C_T", kind="float", title="Correctness on the truth-adversarial paper"),
        Column(
            "r",
            "R",
            kind="float",
            title="Share of A's answers where the judge's verdict matches whether A agrees with T",
        ),
        Column(
            "s_ci",
            "95% CI",
            sortable=False,
            value=lambda row: interval_text(row["ci_low"], row["ci_high"]),
            title="95% bootstrap interval of S, resampling the 15 questions (2,000 resamples, "
            "computed when the score was written)",
        ),
        Column(
            "rank_range",
            "Rank range",
            sortable=False,
            value=lambda row: rank_range_text(row["rank_low"], row["rank_high"]),
            title="Ranks the entry could hold given every entry's interval: from 1 + the "
            "entries whose interval lies wholly above its own, to the entries whose interval "
            "reaches its own",
        ),
        Column(
            "tied",
            "Tied",
            sortable=False,
            value=lambda row: TIED_MARK if row["tied"] else "",
            title="Statistically tied: the interval overlaps the interval of the entry above",
        ),
        *paired_columns("entries"),
        Column("created_at", "Submitted", kind="datetime"),
    ]


# Column key → the stored row's column it sorts by: the API's, named as the page's columns.
BOARD_ORDERING: dict[str, Any] = {
    **{key: column for key, column in ORDERING_COLUMNS.items() if key != "rank"},
    "method_name": NullIf(Lower("method_name"), Value("")),
    "submission": "submission_id",
    "kind": "kind",
}


def leaderboard(request: HttpRequest) -> HttpResponseBase:
    challenge = _challenge(request)
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
def submit(request: HttpRequest) -> HttpResponse:
    challenge = _challenge(request)
    team = user_team(user=request.user, challenge=challenge) if challenge else None
    phase = quota_phase(challenge) if challenge else None
    quota = checklist_quota(team=team, phase=phase) if team else None
    form = SubmissionForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and team is not None and form.is_valid():
        try:
            files: dict[str, PaperUpload | None] = {
                PaperKind.GENUINE: read_upload(form.cleaned_data["genuine"], "genuine"),
                PaperKind.ADVERSARIAL: read_upload(
                    form.cleaned_data.get("adversarial"), "adversarial"
                ),
                PaperKind.TRUTH: read_upload(form.cleaned_data.get("truth"), "truth"),
            }
            submission = checklist_submission_create(
                team=team,
                user=request.user,
                files=files,
                label=form.cleaned_data["label"],
                method_name=form.cleaned_data["method_name"],
                method_description=form.cleaned_data["method_description"],
                method_url=form.cleaned_data["method_url"],
            )
        except ChecklistSubmissionError as exc:
            form.add_error(
                exc.field if exc.field in form.fields else None,
                exc.message,
            )
        else:
            messages.success(
                request,
                "Submission received. Check what was extracted, then start the assessment.",
            )
            return redirect("checklist:submission-detail", pk=submission.pk)
    status = 400 if request.method == "POST" else 200
    # A browser empties every file input of a page sent back with an error: name the files
    # that were chosen, so the participant knows exactly what to choose again.
    choose_again = [
        (form.fields[name].label, upload.name)
        for name in form.fields
        if request.method == "POST" and (upload := request.FILES.get(name)) is not None
    ]
    return render(
        request,
        "checklist/submit.html",
        {
            "form": form,
            "choose_again": choose_again,
            "challenge": challenge,
            "team": team,
            "quota": quota,
            "phase": phase,
            "phase_dates": phase_dates(phase) if phase else "",
            "upload_max_mb": settings.UPLOAD_MAX_MB,
            "word_cap": settings.CHECKLIST_BODY_WORD_CAP,
        },
        status=status,
    )


@login_required
def team(request: HttpRequest) -> HttpResponse:
    """Your team in the challenge, or the forms to create one or join one by invite code."""
    challenge = _challenge(request)
    if challenge is None and request.GET.get("challenge"):
        raise Http404("No such challenge")
    action = request.POST.get("action") if request.method == "POST" else None
    create_form = TeamCreateForm(request.POST if action == "create" else None, prefix="create")
    join_form = TeamJoinForm(request.POST if action == "join" else None, prefix="join")
    form = {"create": create_form, "join": join_form}.get(action or "")
    if form is not None and challenge is not None and form.is_valid():
        try:
            if form is create_form:
                joined = team_create(
                    user=request.user, challenge=challenge, name=form.cleaned_data["name"]
                )
            else:
                joined = team_join(
                    user=request.user, invite_code=form.cleaned_data["invite_code"]
                ).team
        except ChecklistSubmissionError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, f"You are now in team {joined.name}.")
            return redirect(f"{reverse('checklist:team')}?challenge={joined.challenge.slug}")
    mine_ = my_team(user=request.user, challenge=challenge) if challenge else None
    return render(
        request,
        "checklist/team.html",
        {
            "challenge": challenge,
            "my_team": mine_,
            "is_owner": mine_ is not None and mine_.owner == request.user.get_username(),
            "create_form": create_form,
            "join_form": join_form,
        },
        status=400 if form is not None else 200,
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
    path("team/", team, name="team"),
    path("submissions/<int:pk>/", submission_detail, name="submission-detail"),
    path("submissions/<int:pk>/assess/", submission_assess, name="submission-assess"),
    path("submissions/<int:pk>/withdraw/", submission_withdraw, name="submission-withdraw"),
    path("papers/<int:pk>/download/", paper_download, name="paper-download"),
    path("submissions/<int:pk>/choose/", submission_choose, name="submission-choose"),
    path("team/leave/", team_leave_view, name="team-leave"),
    path("team/remove/", team_member_remove_view, name="team-member-remove"),
    path("team/invite/rotate/", team_invite_rotate_view, name="team-invite-rotate"),
]
