"""Reads of the paper checklist challenge: quota, leaderboard, a team's submissions.

Protected data (papers, answers, assessments) is read through ``visibility`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, Prefetch, QuerySet, Value, When
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
    Phase,
    Team,
)
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks
from benchmarks_app.selectors.checklist_boards import board_row_dict, checklist_board
from benchmarks_app.selectors.phases import PhaseClosed, phase_open_for
from benchmarks_app.selectors.visibility import (
    visible_checklist_answers,
    visible_checklist_assessments,
    visible_checklist_submissions,
    visible_papers,
)

# What counts, said the same way on the quota box, in the refusal and after a withdrawal
# (the rule of ``checklist_quota`` and ``counting_towards_quota``).
QUOTA_RULE = (
    "Refused files never count. A withdrawn submission still counts for the day it was "
    "uploaded but frees its place in the total."
)


@dataclass(frozen=True)
class QuotaStatus:
    daily_limit: int
    total_limit: int
    used_today: int
    used_total: int
    resets_at: datetime
    # The open phase the counts are within (its name), or None: the challenge as a whole.
    phase: str | None = None

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
            where = f"the {self.phase} phase" if self.phase else "this challenge"
            return (
                f"Your team has used all {self.total_limit} submissions of {where}. " + QUOTA_RULE
            )
        return (
            f"Your team has used its {self.daily_limit} submissions for today; the daily "
            f"quota resets at {self.resets_at:%Y-%m-%d %H:%M} UTC. " + QUOTA_RULE
        )

    @property
    def rule(self) -> str:
        return QUOTA_RULE

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
            "phase": self.phase,
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


def quota_phase(challenge: Challenge, *, now: datetime | None = None) -> Phase | None:
    """The phase new submissions to ``challenge`` land in now; None without phases, or
    when none is open (submissions are then refused anyway)."""
    try:
        return phase_open_for(challenge, now=now)
    except PhaseClosed:
        return None


def checklist_quota(
    *, team: Team, now: datetime | None = None, phase: Phase | str | None = "open"
) -> QuotaStatus:
    """Submissions counted today (UTC day) and in all, within the open phase if any.

    ``phase`` is the phase to count within; ``"open"`` (the default) means the phase open
    now. A phase's own daily and total limits replace the challenge's while it is open; a
    limit the phase leaves empty is the challenge's, counted within the phase.

    Refused files are never stored, so they never count. Every stored submission counts on
    the day it was uploaded, withdrawn ones included: otherwise submit-then-withdraw would
    give a team unlimited uploads (and extractions) a day. A withdrawal frees its slot of
    the total only when its assessment never started (see ``counting_towards_quota``).
    """
    now = now or timezone.now()
    in_phase = quota_phase(team.challenge, now=now) if isinstance(phase, str) else phase
    day_start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    submissions = ChecklistSubmission.objects.filter(team=team)
    daily, total = challenge_limits(team.challenge)
    if in_phase is not None:
        submissions = submissions.filter(phase=in_phase)
        daily = in_phase.daily_limit if in_phase.daily_limit is not None else daily
        total = in_phase.total_limit if in_phase.total_limit is not None else total
    return QuotaStatus(
        daily_limit=daily,
        total_limit=total,
        used_today=submissions.filter(created_at__gte=day_start).count(),
        used_total=submissions.counting_towards_quota().count(),
        resets_at=day_start + timedelta(days=1),
        phase=in_phase.name if in_phase is not None else None,
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
    # The owner may remove members and rotate the invite code (see ``team_owner_id``).
    owner: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.team.pk,
            "name": self.team.name,
            "challenge": self.team.challenge.slug,
            "owner": self.owner,
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
    memberships = list(
        Membership.objects.filter(team=team).select_related("user").order_by("created_at", "pk")
    )
    owner_id = team.owner_id or (memberships[0].user_id if memberships else None)
    owner = next((m.user.get_username() for m in memberships if m.user_id == owner_id), None)
    return MyTeam(
        team=team,
        invite_code=team.invite_code,
        members=[TeamMember(m.user.get_username(), m.created_at) for m in memberships],
        owner=owner,
    )


def team_owner_id(team: Team) -> int | None:
    """The team's owner: ``Team.owner``, else (teams made before owners) its earliest member."""
    if team.owner_id is not None:
        return team.owner_id
    return (
        Membership.objects.filter(team=team)
        .order_by("created_at", "pk")
        .values_list("user_id", flat=True)
        .first()
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


def checklist_leaderboard(
    *, challenge_slug: str | None = None, phase: Phase | str | None = None, user: Any = None
) -> list[dict[str, Any]]:
    """Each team's entry on the board, ranked by S, then C_G, then the earliest submission.

    A team's entry is the submission it chose for the board, else its best (see
    ``services.checklist.boards``). Each row carries the 95% bootstrap interval of S over
    questions stored with its score (``ci_low``, ``ci_high``; None for scores written before
    intervals were stored, which then count as a point), the rank range the intervals imply
    (``rank_low``, ``rank_high``), ``tied`` when its interval overlaps the row above, and
    ``is_baseline``, ``phase`` and the entry's ``method_*`` metadata.

    Teams of different challenges are never ranked together: without a slug, the default
    challenge (see :func:`default_challenge`) is shown; ``phase`` picks the phase's board
    (see :func:`~benchmarks_app.selectors.checklist_boards.checklist_board`), and ``user``
    decides what a hidden phase shows. The rows are one query on the stored board rows.
    """
    challenge = default_challenge(challenge_slug)
    board = checklist_board(challenge=challenge, phase=phase, user=user)
    rows = attach_marks(CHECKLIST_SHAPE, list(board.rows()))
    return [board_row_dict(row, board=board) for row in rows]


def team_submissions(*, user: Any, team: Team) -> list[ChecklistSubmission]:
    """The team's submissions with their latest score and run (for "my submissions")."""
    return list(
        visible_checklist_submissions(user)
        .filter(team=team)
        .select_related("phase")
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
    submission = visible_checklist_submissions(user).select_related("phase").filter(pk=pk).first()
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


# How each CHECKLIST_VOTES policy asks, in words for the run page.
VOTE_POLICY_TEXT = {
    "adaptive": "one vote; another only where the first failed or was unsure",
    "two": "two votes, a third on disagreement",
    "single": "the first vote that could be obtained",
}


def checklist_run_votes(*, run: EvaluationRun) -> dict[str, Any] | None:
    """How ``run``'s answers were voted on (CHECKLIST_VOTES) and the votes it cost: answers
    judged, votes asked, answers asked again; ``None`` before a checklist run recorded it."""
    policy = (run.judge_config or {}).get("votes")
    if run.benchmark != "checklist" or not policy:
        return None
    rows = ChecklistAssessment.objects.filter(run=run).exclude(status=AssessmentStatus.SKIPPED_TODO)
    counts = [len(v) if isinstance(v, list) else 0 for v in rows.values_list("votes", flat=True)]
    return {
        "policy": policy,
        "text": VOTE_POLICY_TEXT.get(policy, policy),
        "answers": len(counts),
        "votes": sum(counts),
        "asked_again": sum(1 for n in counts if n > 1),
        "two_would_ask": 2 * len(counts),
    }


def checklist_recorded_votes(*, run_ids: list[int] | None = None) -> list[list[dict[str, Any]]]:
    """The votes recorded on each judged checklist answer (TODO answers have none), of
    ``run_ids`` or of every checklist run: what :func:`scoring.checklist.votes.compare_policies`
    reads. Staff reads (management command, bench): no visibility filter."""
    rows = ChecklistAssessment.objects.exclude(status=AssessmentStatus.SKIPPED_TODO)
    if run_ids:
        rows = rows.filter(run_id__in=run_ids)
    return [v for v in rows.order_by("pk").values_list("votes", flat=True) if isinstance(v, list)]
