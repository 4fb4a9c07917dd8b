"""Factories of phases (checklist challenges' by default) relative to now."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.utils import timezone

from benchmarks_app.models import Benchmark, Phase
from tests.factories.checklist import ChallengeFactory


class ChecklistPhaseFactory(factory.django.DjangoModelFactory):
    """An open phase of a checklist challenge: started an hour ago, ends in a week."""

    class Meta:
        model = Phase

    benchmark = Benchmark.CHECKLIST
    challenge = factory.SubFactory(ChallengeFactory)
    name = factory.Sequence(lambda n: f"Phase {n}")
    slug = factory.Sequence(lambda n: f"phase-{n}")
    starts_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1))
    ends_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=7))
