"""Checklist demo: a challenge, two teams, a G/A/T triplet and a G-only entry, scored offline.

The triplet is built from the AutoSurvey sample paper (``sample_data/checklist/demo``: planted
errors and falsified answers in A, truthful answers explaining them in T); the G-only entry is
the MetaAlbum sample PDF. Running the demo again reuses what is there.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TextIO

from django.contrib.auth import get_user_model

from benchmarks_app.formatting import render_checklist_table
from benchmarks_app.models import Challenge, PaperKind, SubmissionStatus
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.services.checklist import (
    PaperUpload,
    checklist_membership_add,
    checklist_submission_create,
    checklist_team_create,
)
from benchmarks_app.services.runs import run_wait
from scoring.judges import failures

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "checklist"
CHALLENGE_SLUG = "neurips-2024-checklist"


def _upload(path: Path) -> PaperUpload:
    return PaperUpload(name=path.name, data=path.read_bytes())


def run_demo(out: TextIO) -> None:
    challenge, _ = Challenge.objects.get_or_create(
        slug=CHALLENGE_SLUG,
        defaults={
            "name": "NeurIPS 2024 checklist assistant",
            "description": "Genuine papers and G/A/T triplets assessed against the NeurIPS "
            "2024 paper checklist.",
            "daily_limit": 5,
            "total_limit": 50,
        },
    )
    user_model = get_user_model()
    entries = (
        (
            "Deceivers",
            "checklist-alice",
            {
                PaperKind.GENUINE: SAMPLE / "demo" / "genuine.tex",
                PaperKind.ADVERSARIAL: SAMPLE / "demo" / "adversarial.tex",
                PaperKind.TRUTH: SAMPLE / "demo" / "truth.tex",
            },
            "AutoSurvey G/A/T triplet",
        ),
        (
            "Genuine Only",
            "checklist-bob",
            {PaperKind.GENUINE: SAMPLE / "papers" / "MetaAlbum.pdf"},
            "MetaAlbum (G only)",
        ),
    )
    for team_name, username, files, label in entries:
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            out.write(f"checklist: created user {username} (password {password})\n")
        team = checklist_team_create(challenge=challenge, name=team_name)
        checklist_membership_add(team=team, user=user)
        if team.submissions.filter(status=SubmissionStatus.SCORED).exists():
            out.write(f"checklist: team {team_name} already has a scored entry\n")
            continue
        submission = checklist_submission_create(
            team=team,
            user=user,
            files={kind: _upload(path) for kind, path in files.items()},
            label=label,
            assess=True,
            judge="offline",
        )
        run = run_wait(run=submission.runs.order_by("-created_at")[0])
        out.write(
            f"checklist: team {team_name}: submission #{submission.pk} ({label}), "
            f"run #{run.pk} {run.status} ({run.progress_done}/{run.progress_total} answers)\n"
        )
        if causes := ended_run_failure_causes(run=run):
            out.write(f"checklist: {run.error}\n{failures.details(causes)}\n")
    out.write("\nChecklist leaderboard (offline judge):\n")
    out.write(render_checklist_table(checklist_leaderboard(challenge_slug=CHALLENGE_SLUG)) + "\n")
