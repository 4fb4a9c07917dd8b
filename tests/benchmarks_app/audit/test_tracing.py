# mypy: disable-error-code="index,union-attr,arg-type"
"""Judge calls exported as OpenTelemetry spans, run → piece → call (issue 38).

The SDK's in-memory exporter stands in for the OTLP endpoint: a run exports one span per
request its judge sent, each with its model, tokens (cached ones too), latency and outcome,
under its piece's span, under the run's span.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks_app.models import EvaluationRun, JudgeCall
from scoring.judges import tracing
from tests.benchmarks_app.audit.conftest import fake_verdict, publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, error_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.install(tracing.new_provider(exporter=exporter))
    try:
        yield exporter
    finally:
        tracing.install(None)


def _answer_with_cache(body: dict[str, Any]) -> Any:
    answer = fake_verdict(body)
    answer["usage"]["prompt_tokens_details"] = {"cached_tokens": 60}
    return answer


def test_a_run_exports_one_span_per_judge_call(
    openai_settings: Any, exported: InMemorySpanExporter
) -> None:
    first, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Unrelated gas issue", "Reentrancy when withdrawing"],
    )
    second, _ = repo_with_scan(truths=["Overflow in mint"], findings=["Overflow when minting"])
    publish_dataset(first, second)
    asked = 0

    def flaky(body: dict[str, Any]) -> Any:
        # The first request fails once (retried): its span says so.
        nonlocal asked
        asked += 1
        return (500, error_body("overloaded")) if asked == 1 else _answer_with_cache(body)

    with FakeOpenAI(flaky) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        call_command(
            "evaluate_audit", "--scanner", "tool", "--judge", "openai", "--wait",
            stdout=io.StringIO(),
        )  # fmt: skip
    run = EvaluationRun.objects.get()
    assert run.status == "succeeded"
    spans = exported.get_finished_spans()
    calls = [s for s in spans if s.name == "judge call"]
    sent = JudgeCall.objects.filter(run=run).exclude(status="cached")
    assert len(calls) == sent.count() == len(server.requests) >= 4
    outcomes = sorted(str(s.attributes["judge.outcome"]) for s in calls)
    assert outcomes == sorted(sent.values_list("status", flat=True))
    assert outcomes.count("error") == 1
    for span in calls:
        attrs = span.attributes
        assert attrs["gen_ai.request.model"] == "fake-model"
        assert float(attrs["judge.latency_ms"]) > 0
        if attrs["judge.outcome"] == "ok":
            assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
                100,
                20,
            )
            assert attrs["gen_ai.usage.cached_input_tokens"] == 60
            assert span.status.is_ok
        else:
            assert not span.status.is_ok and "overloaded" in str(span.status.description)

    # run → piece → call: one piece span per repo, each call under one of them.
    runs = [s for s in spans if s.name == f"run #{run.pk}"]
    pieces = [s for s in spans if s.name.startswith("piece ")]
    assert len(runs) == 1 and runs[0].attributes["run.status"] == "succeeded"
    assert len(pieces) == 2
    run_span = runs[0].context
    for piece in pieces:
        assert piece.parent is not None and piece.parent.span_id == run_span.span_id
        assert piece.context.trace_id == run_span.trace_id
    piece_ids = {p.context.span_id for p in pieces}
    assert all(c.parent is not None and c.parent.span_id in piece_ids for c in calls)
    assert {c.context.trace_id for c in calls} == {run_span.trace_id}


def test_no_endpoint_no_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in tracing.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    tracing.install(None)
    assert not tracing.enabled()
    assert tracing.call_span(judge="j", model="m", vote_number=1, attempt=1) is None
    with tracing.piece_span(run_id=1, token="t", piece="p"):
        pass


def test_an_endpoint_in_the_environment_turns_tracing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/")
    tracing.install(None)
    try:
        assert tracing.enabled()
        span = tracing.call_span(judge="j", model="m", vote_number=1, attempt=1)
        assert span is not None and span.span.is_recording()
    finally:
        provider = tracing._provider
        tracing.install(None)
        if provider is not None:
            provider.shutdown()
