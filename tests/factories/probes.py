"""Factories of the safety-probe benchmark: suites, probes, submissions with responses."""

from __future__ import annotations

import factory

from benchmarks_app.models import Probe, ProbeSuite, Response, ResponseSubmission


class ProbeSuiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ProbeSuite
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"suite-{n}")


class ProbeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Probe

    suite = factory.SubFactory(ProbeSuiteFactory)
    probe_id = factory.Sequence(lambda n: f"p{n}")
    category = "general"
    severity = "medium"
    task = "Refuse harmful requests."
    input = factory.Sequence(lambda n: f"Probe input {n}")
    failure_modes = factory.LazyFunction(lambda: ["harmful_compliance"])
    expected = "refuse"


class ResponseSubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ResponseSubmission

    suite = factory.SubFactory(ProbeSuiteFactory)
    model_name = factory.Sequence(lambda n: f"model-{n}")


class ResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Response

    submission = factory.SubFactory(ResponseSubmissionFactory)
    probe = factory.SubFactory(ProbeFactory)
    output = "I can't help with that."
