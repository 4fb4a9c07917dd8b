"""Reads of the paper checklist challenge: quota, leaderboard, a team's submissions.

Protected data (papers, answers, assessments) is read through ``visibility`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, Prefetch, QuerySet, Subquery, Value, When
from django.utils import timezone

from benchmarks_app.models import (
    AssessmentStatus,
    Challenge,
    ChecklistAssessment,
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    Membership,
    Paper,
    PaperKind,
    Team,
)
from benchmarks_app.selectors.visibility import (
    visible_checklist_answers,
    visible_checklist_assessments,
    visible_checklist_submissions,
    visible_papers,
)
from scoring.checklist.scores import CI_METRIC
from scoring.stats import board_ranks


@dataclass(frozen=True)
class QuotaStatus:
    daily_limit: int
    total_limit: int
    used_today: int
    used_total: int
    resets_at: datetime

    @property
    def remaining_today(self) -> int:
        return max(0, self.daily_limit - self.used_today)

    @property
    def remaining_total(self) -> int:
        return max(0, self.total_limit - self.used_total)

    @property
    def remaining(self) -> int:
        return min(self.remaining_today, self.remaining_total)

    @property
    def exceeded_message(self) -> str:
        if self.remaining_total <= 0:
            return (
                f"Your team has used all {self.total_limit} submissions of this challenge. "
                "Refused or withdrawn submissions do not count."
            )
        return (
            f"Your team has used its {self.daily_limit} submissions for today; the daily "
            f"quota resets at {self.resets_at:%Y-%m-%d %H:%M} UTC. Refused files do not count; "
            "a withdrawn submission counts on the day it was uploaded."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "daily_limit": self.daily_limit,
            "total_limit": self.total_limit,
            "used_today": self.used_today,
            "used_total": self.used_total,
            "remaining_today": self.remaining_today,
            "remaining_total": self.remaining_total,
            "remaining": self.remaining,
            "resets_at": self.resets_at.isoformat(),
        }


# Papers are shown in the challenge's order, G then A then T (not alphabetically).
PAPER_ORDER = Case(
    When(kind=PaperKind.GENUINE, then=Value(0)),
    When(kind=PaperKind.ADVERSARIAL, then=Value(1)),
    default=Value(2),
)


def challenge_limits(challenge: Challenge) -> tuple[int, int]:
    daily = challenge.daily_limit
    total = challenge.total_limit
    return (
        int(daily if daily is not None else getattr(settings, "CHECKLIST_DAILY_LIMIT", 3)),
        int(total if total is not None else getattr(settings, "CHECKLIST_TOTAL_LIMIT", 20)),
    )


def checklist_quota(*, team: Team, now: datetime | None = None) -> QuotaStatus:
    """Submissions counted today (UTC day) and in all.

    Refused files are never stored, so they never count. Every stored submission counts on
    the day it was uploaded, withdrawn ones included: otherwise submit-then-withdraw would
    give a team unlimited uploads (and extractions) a day. A withdrawal frees its slot of
    the total only when its assessment never started (see ``counting_towards_quota``).
    """
    now = now or timezone.now()
    day_start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    submissions = ChecklistSubmission.objects.filter(team=team)
    daily, total = challenge_limits(team.challenge)
    return QuotaStatus(
        daily_limit=daily,
        total_limit=total,
        used_today=submissions.filter(created_at__gte=day_start).count(),
        used_total=submissions.counting_towards_quota().count(),
        resets_at=day_start + timedelta(days=1),
    )


def user_team(*, user: Any, challenge: Challenge) -> Team | None:
    if user is None or not user.is_authenticated:
        return None
    membership = (
        Membership.objects.filter(user=user, challenge=challenge).select_related("team").first()
    )
    return membership.team if membership else None


@dataclass(frozen=True)
class TeamMember:
    username: str
    joined_at: datetime


@dataclass(frozen=True)
class MyTeam:
    """The user's own team; the invite code is read here only, for its members."""

    team: Team
    invite_code: str
    members: list[TeamMember]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.team.pk,
            "name": self.team.name,
            "challenge": self.team.challenge.slug,
            "invite_code": self.invite_code,
            "members": [
                {"username": m.username, "joined_at": m.joined_at.isoformat()} for m in self.members
            ],
        }


def my_team(*, user: Any, challenge: Challenge) -> MyTeam | None:
    """The user's team in ``challenge`` with its members and invite code, or None."""
    team = user_team(user=user, challenge=challenge)
    if team is None:
        return None
    memberships = (
        Membership.objects.filter(team=team).select_related("user").order_by("created_at", "pk")
    )
    return MyTeam(
        team=team,
        invite_code=team.invite_code,
        members=[TeamMember(m.user.get_username(), m.created_at) for m in memberships],
    )


def user_teams(user: Any) -> list[Team]:
    if user is None or not user.is_authenticated:
        return []
    return list(
        Team.objects.filter(memberships__user=user).select_related("challenge").order_by("name")
    )


def open_challenges() -> QuerySet[Challenge]:
    return Challenge.objects.filter(is_open=True)


def _default_challenge_first() -> QuerySet[Challenge]:
    """The newest open challenge first, then the newest closed one."""
    return Challenge.objects.order_by("-is_open", "-created_at", "-pk")


def default_challenge(slug: str | None = None) -> Challenge | None:
    if slug:
        return Challenge.objects.filter(slug=slug).first()
    return _default_challenge_first().first()


def checklist_leaderboard(*, challenge_slug: str | None = None) -> list[dict[str, Any]]:
    """Each team's best entry, ranked by S, then C_G, then the earliest submission.

    Each row carries the 95% bootstrap interval of S over questions stored with its score
    (``ci_low``, ``ci_high``; None for scores written before intervals were stored, which then
    count as a point), the rank range the intervals imply (``rank_low``, ``rank_high``) and
    ``tied`` when its interval overlaps the row above (see ``scoring.stats.board_ranks``).

    Teams of different challenges are never ranked together: without a slug, the default
    challenge (see :func:`default_challenge`) is shown. A submission's score is its latest
    complete one (re-assessments append scores). One query, whatever the number of teams and
    submissions.
    """
    qs = ChecklistScore.objects.select_related("submission__team", "submission__challenge").exclude(
        submission__team__is_internal=True
    )
    if challenge_slug:
        qs = qs.filter(submission__challenge__slug=challenge_slug)
    else:
        qs = qs.filter(
            submission__challenge_id=Subquery(_default_challenge_first().values("pk")[:1])
        )
    latest: dict[int, ChecklistScore] = {}
    for score in qs.order_by("created_at", "pk"):
        latest[score.submission_id] = score  # later scores replace earlier ones
    best: dict[int, ChecklistScore] = {}

    def key(s: ChecklistScore) -> tuple[float, float, float, int]:
        return (-s.s, -s.c_g, s.submission.created_at.timestamp(), s.submission_id)

    for score in latest.values():
        team_id = score.submission.team_id
        if team_id not in best or key(score) < key(best[team_id]):
            best[team_id] = score
    rows = []
    ranked = sorted(best.values(), key=key)
    marks = board_ranks([(score.s, *_ci_bounds(score)) for score in ranked])
    for rank, (score, mark) in enumerate(zip(ranked, marks, strict=True), start=1):
        sub = score.submission
        low, high = _ci_bounds(score)
        rows.append(
            {
                "rank": rank,
                "team": sub.team.name,
                "team_id": sub.team_id,
                "challenge": sub.challenge.slug,
                "submission": sub.pk,
                "kind": sub.kind,
                "c_g": score.c_g,
                "c_a": score.c_a,
                "c_t": score.c_t,
                "r": score.r,
                "s": score.s,
                "ci_low": low,
                "ci_high": high,
                "rank_low": mark.rank_low,
                "rank_high": mark.rank_high,
                "tied": mark.tied,
                "created_at": sub.created_at,
            }
        )
    return rows


def _ci_bounds(score: ChecklistScore) -> tuple[float | None, float | None]:
    ci = score.ci or {}
    if ci.get("metric") != CI_METRIC:
        return None, None
    return ci.get("low"), ci.get("high")


def team_submissions(*, user: Any, team: Team) -> list[ChecklistSubmission]:
    """The team's submissions with their latest score and run (for "my submissions")."""
    return list(
        visible_checklist_submissions(user)
        .filter(team=team)
        .prefetch_related(
            Prefetch("scores", queryset=ChecklistScore.objects.order_by("-created_at")),
            Prefetch("runs", queryset=EvaluationRun.objects.order_by("-created_at")),
            Prefetch("papers", queryset=Paper.objects.order_by(PAPER_ORDER)),
        )
        .order_by("-created_at")
    )


@dataclass
class SubmissionDetail:
    submission: ChecklistSubmission
    papers: list[Paper]
    # Per paper kind: rows of (answer, latest assessment or None) in question order.
    rows: dict[str, list[tuple[Any, ChecklistAssessment | None]]]
    score: ChecklistScore | None
    run: EvaluationRun | None
    failed_attempts: int


def checklist_submission_detail(*, user: Any, pk: int) -> SubmissionDetail | None:
    """Everything the submission page shows, or ``None`` when the user may not see it."""
    submission = visible_checklist_submissions(user).filter(pk=pk).first()
    if submission is None:
        return None
    papers = list(visible_papers(user).filter(submission=submission).order_by(PAPER_ORDER))
    answers = list(
        visible_checklist_answers(user)
        .filter(paper__submission=submission)
        .order_by("paper__kind", "question__number")
    )
    run = submission.runs.order_by("-created_at").first()
    assessments: dict[int, ChecklistAssessment] = {}
    failed = 0
    if run is not None:
        for a in visible_checklist_assessments(user).filter(run=run).order_by("created_at"):
            if a.status == AssessmentStatus.JUDGE_FAILED:
                failed += 1
                assessments.setdefault(a.answer_id, a)
            else:
                assessments[a.answer_id] = a
    rows: dict[str, list[tuple[Any, ChecklistAssessment | None]]] = {}
    for answer in answers:
        rows.setdefault(answer.paper.kind, []).append((answer, assessments.get(answer.pk)))
    score = submission.scores.order_by("-created_at").first()
    return SubmissionDetail(submission, papers, rows, score, run, failed)


def visible_paper(*, user: Any, pk: int) -> Paper | None:
    return visible_papers(user).filter(pk=pk).first()
