"""Factories shared by the cross-benchmark tests: users, tokens, runs and their targets."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from benchmarks_app.models import (
    Benchmark,
    Challenge,
    ChecklistSubmission,
    EvaluationRun,
    Membership,
    ProbeSuite,
    Repo,
    ResponseSubmission,
    RunStatus,
    Scanner,
    SubmissionKind,
    Team,
    TruthFinding,
)

PASSWORD = "correct-horse-battery"


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password(PASSWORD)


class StaffFactory(UserFactory):
    is_staff = True


def token_for(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


class ScannerFactory(factory.django.DjangoModelFactory[Scanner]):
    class Meta:
        model = Scanner

    name = factory.Sequence(lambda n: f"scanner-{n}")
    description = "An AI auditing tool"


class RepoFactory(factory.django.DjangoModelFactory[Repo]):
    class Meta:
        model = Repo

    project_id = factory.Sequence(lambda n: f"code4rena_project-{n}_2025_01")
    name = factory.Sequence(lambda n: f"Project {n}")
    platform = "code4rena"
    is_public = False


class TruthFindingFactory(factory.django.DjangoModelFactory[TruthFinding]):
    class Meta:
        model = TruthFinding

    repo = factory.SubFactory(RepoFactory)
    finding_id = factory.Sequence(lambda n: f"H-{n:02d}")
    order = factory.Sequence(lambda n: n)
    severity = "High"
    title = factory.Sequence(lambda n: f"Reentrancy in withdraw #{n}")
    description = "SECRET-DESCRIPTION: the vault can be drained through a callback."


class ProbeSuiteFactory(factory.django.DjangoModelFactory[ProbeSuite]):
    class Meta:
        model = ProbeSuite
        django_get_or_create = ("name",)

    name = "demo-suite"


class ResponseSubmissionFactory(factory.django.DjangoModelFactory[ResponseSubmission]):
    class Meta:
        model = ResponseSubmission

    suite = factory.SubFactory(ProbeSuiteFactory)
    model_name = factory.Sequence(lambda n: f"model-{n}")
    owner = None


class ChallengeFactory(factory.django.DjangoModelFactory[Challenge]):
    class Meta:
        model = Challenge
        django_get_or_create = ("slug",)

    name = "NeurIPS checklist 2024"
    slug = "neurips-2024"


class TeamFactory(factory.django.DjangoModelFactory[Team]):
    class Meta:
        model = Team

    challenge = factory.SubFactory(ChallengeFactory)
    name = factory.Sequence(lambda n: f"team-{n}")


def join(user, team) -> Membership:
    return Membership.objects.create(user=user, team=team, challenge=team.challenge)


class ChecklistSubmissionFactory(factory.django.DjangoModelFactory[ChecklistSubmission]):
    class Meta:
        model = ChecklistSubmission

    team = factory.SubFactory(TeamFactory)
    challenge = factory.SelfAttribute("team.challenge")
    kind = SubmissionKind.TRIPLET


class RunFactory(factory.django.DjangoModelFactory[EvaluationRun]):
    """A run that is never enqueued (tests set its state directly)."""

    class Meta:
        model = EvaluationRun

    benchmark = Benchmark.AUDIT
    scanner = factory.SubFactory(ScannerFactory)
    judge = "offline"
    status = RunStatus.QUEUED


class ProbeRunFactory(RunFactory):
    benchmark = Benchmark.PROBES
    scanner = None  # type: ignore[assignment]
    probe_submission = factory.SubFactory(ResponseSubmissionFactory)


class ChecklistRunFactory(RunFactory):
    benchmark = Benchmark.CHECKLIST
    scanner = None  # type: ignore[assignment]
    checklist_submission = factory.SubFactory(ChecklistSubmissionFactory)
