"""Maintainers check a judge on one paper without a web upload (``assess_checklist``).

The paper is stored and assessed exactly like a participant's Genuine-only entry (same
extraction, same queue, same processor), so what a maintainer sees is what a team would get.
It is filed under a staff team of its own, :data:`MAINTAINERS_TEAM`, created without members:

- no participant's quota is touched, and the staff team's own quota is not enforced either
  (a judge check is not an entry of the competition);
- the team is marked ``is_internal``, so its checks never reach the public leaderboard (a
  judge check is not an entry of the competition); staff see them in the admin and on the
  run and submission pages.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from benchmarks_app.models import (
    Challenge,
    ChecklistSubmission,
    EvaluationRun,
    JudgeRecord,
    Membership,
    Paper,
    PaperKind,
    SubmissionKind,
    SubmissionStatus,
    Team,
)
from benchmarks_app.services.checklist.errors import ChecklistSubmissionError
from benchmarks_app.services.checklist.papers import (
    PaperUpload,
    checklist_extract_upload,
    questions_by_number,
)
from benchmarks_app.services.checklist.submissions import (
    _paper_create,
    checklist_submission_assess,
)

# Participants' team names are unique case-insensitively (team_create), so once this team
# exists nobody can register it; before that, a participant team of that name is refused.
MAINTAINERS_TEAM = "Maintainers (judge checks)"

# ``recorded`` replays imported CSV verdicts; it cannot assess a paper (import_checklist_assessed).
MAINTAINER_JUDGES = ("offline", "openai")


def checklist_maintainer_judge(judge: str) -> str:
    """The run's judge name (``offline`` or ``openai:MODEL``), refused with a clear message.

    The openai model must be one of ``JUDGE_MODELS`` when that list is set, as for audit runs:
    the operator decides which (paid) models may be called, maintainers' checks included.
    """
    name = judge.strip()
    record = JudgeRecord.objects.filter(name=name).first()
    if record is not None and record.kind != "replay" and name not in MAINTAINER_JUDGES:
        # A curated judge: its record says the model (maintainers chose it already).
        return name
    base, _, model = name.partition(":")
    if base not in MAINTAINER_JUDGES:
        raise ChecklistSubmissionError(
            f"Unknown judge {name!r}: use offline or openai[:MODEL].", field="judge"
        )
    if base == "offline":
        if model:
            raise ChecklistSubmissionError(
                f"The offline judge takes no model ({name!r}).", field="judge"
            )
        return "offline"
    model = model.strip() or str(settings.JUDGE_MODEL)
    allowed = list(getattr(settings, "JUDGE_MODELS", []) or [])
    if allowed and model not in allowed:
        raise ChecklistSubmissionError(
            f"Judge model {model!r} is not one of the configured JUDGE_MODELS "
            f"({', '.join(allowed)}).",
            field="judge",
        )
    return f"openai:{model}"


def _maintainers_team(*, challenge: Challenge) -> Team:
    """The staff team of ``challenge``, refusing a participants' team that has its name."""
    team = Team.objects.filter(challenge=challenge, name__iexact=MAINTAINERS_TEAM).first()
    if team is None:
        return Team.objects.create(challenge=challenge, name=MAINTAINERS_TEAM, is_internal=True)
    if Membership.objects.filter(team=team).exists():
        # Filing a check there would spend that team's quota and show on its page.
        raise ChecklistSubmissionError(
            f"The team {team.name!r} of {challenge.name} has participants; rename it in the "
            "admin before checking judges there.",
            field="challenge",
        )
    if not team.is_internal:
        team.is_internal = True
        team.save(update_fields=["is_internal", "updated_at"])
    return team


def checklist_paper_assess_for_maintainers(
    *,
    challenge: Challenge,
    upload: PaperUpload,
    judge: str,
    label: str = "",
) -> EvaluationRun:
    """Store ``upload`` as a Genuine-only entry of the maintainers' team and queue its run.

    The judge is checked before the paper is read, and the paper is extracted (seconds for a
    long PDF) before any row is written, so a refusal stores nothing. The run is sent to the
    queue when the transaction commits; ``run_wait`` processes it when no worker is running.
    No open-challenge or quota check: this is the staff path, like ``checklist_team_create``.
    """
    name = checklist_maintainer_judge(judge)
    extracted = checklist_extract_upload(kind=PaperKind.GENUINE, upload=upload)
    questions = questions_by_number()
    stored: list[Paper] = []
    try:
        with transaction.atomic():
            team = _maintainers_team(challenge=challenge)
            submission = ChecklistSubmission.objects.create(
                challenge=challenge,
                team=team,
                submitted_by=None,
                kind=SubmissionKind.GENUINE_ONLY,
                status=SubmissionStatus.EXTRACTED,
                label=(label or f"Judge check: {name} on {upload.name}")[:200],
            )
            stored.append(
                _paper_create(
                    submission=submission,
                    kind=PaperKind.GENUINE,
                    upload=upload,
                    extracted=extracted,
                    questions=questions,
                )
            )
            return checklist_submission_assess(submission=submission, judge=name)
    except Exception:
        # The transaction rolled back the rows; the stored file is not transactional.
        for paper in stored:
            paper.file.delete(save=False)
        raise
