"""Factories of the checklist challenge: challenges, teams, members, papers with answers."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from benchmarks_app.models import (
    Challenge,
    ChecklistAnswer,
    ChecklistQuestion,
    ChecklistSubmission,
    Membership,
    Paper,
    SubmissionKind,
    SubmissionStatus,
    Team,
)


class ChecklistUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"checklist-user-{n}")
    password = factory.django.Password("pw-12345")


class ChallengeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Challenge

    name = factory.Sequence(lambda n: f"Checklist challenge {n}")
    slug = factory.Sequence(lambda n: f"checklist-{n}")
    daily_limit = 5
    total_limit = 10


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    challenge = factory.SubFactory(ChallengeFactory)
    name = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(ChecklistUserFactory)
    challenge = factory.SelfAttribute("team.challenge")


class ChecklistSubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ChecklistSubmission

    team = factory.SubFactory(TeamFactory)
    challenge = factory.SelfAttribute("team.challenge")
    kind = SubmissionKind.GENUINE_ONLY
    status = SubmissionStatus.EXTRACTED


class PaperFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Paper

    submission = factory.SubFactory(ChecklistSubmissionFactory)
    team = factory.SelfAttribute("submission.team")
    kind = "G"
    title = "A paper"
    extracted_text = "1 Introduction\nWe study things.\n"


def add_answers(paper: Paper, answers: dict[int, str], justification: str = "See text.") -> None:
    """Answers for the 15 questions (missing numbers become TODO)."""
    questions = {q.number: q for q in ChecklistQuestion.objects.all()}
    ChecklistAnswer.objects.bulk_create(
        [
            ChecklistAnswer(
                paper=paper,
                question=questions[n],
                answer=answers.get(n, "TODO"),
                justification=justification if answers.get(n, "TODO") != "TODO" else "",
            )
            for n in range(1, 16)
        ]
    )
