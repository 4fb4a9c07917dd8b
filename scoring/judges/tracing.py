"""Judge calls as OpenTelemetry spans: run → piece → call, for an operator's tracing tool.

Only where ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (Jaeger's, Langfuse's or any collector's OTLP
HTTP endpoint; the exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables, headers
included). Unset, nothing is imported and every function here returns at once: tracing costs
nothing.

A run is processed in pieces, by several workers and processes, and no process holds it from
start to end. Its trace and span ids are therefore derived from the run itself
(:func:`run_ids`): every piece, wherever it runs, starts its span under the same run span, and
the run span is exported once, by whoever ends the run (:func:`export_run`). A piece's span is
the current span while the piece runs; each request a judge sends (each attempt, as in the
ledger) is a span under it with the model, prompt, completion and cached tokens, latency and
outcome. Cache hits send nothing and have no span.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "evalplatform"

_lock = threading.Lock()
_provider: Any = None
# The ids the next span takes (the run span exported at the run's end): see _RunIds.
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "judge_trace_forced_ids", default=None
)


def enabled() -> bool:
    """Whether spans are exported: a provider was installed, or an OTLP endpoint is set."""
    return _provider is not None or any(os.environ.get(v) for v in ENDPOINT_VARIABLES)


def install(provider: Any) -> None:
    """Export through ``provider`` (a ``TracerProvider``; tests give one with an in-memory
    exporter); ``None`` goes back to the environment's endpoint, if any."""
    global _provider
    with _lock:
        _provider = provider


def new_provider(*, exporter: Any = None) -> Any:
    """A ``TracerProvider`` that takes the run's ids for its run spans; with ``exporter``
    (tests) spans are exported as they end, else in batches to the OTLP endpoint."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": name}), id_generator=_ids())
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _tracer() -> Any | None:
    global _provider
    if _provider is None:
        if not any(os.environ.get(v) for v in ENDPOINT_VARIABLES):
            return None
        with _lock:
            if _provider is None:
                _provider = new_provider()
    return _provider.get_tracer("evalplatform.judge")


def flush() -> None:
    """Send the spans still buffered (a worker about to exit, a command that ends)."""
    if _provider is not None:
        _provider.force_flush()


def _ids() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _RunIds(RandomIdGenerator):
        """Random ids, except for a span started while :data:`_forced_ids` is set."""

        def generate_trace_id(self) -> int:
            forced = _forced_ids.get()
            return forced[0] if forced else super().generate_trace_id()

        def generate_span_id(self) -> int:
            forced = _forced_ids.get()
            return forced[1] if forced else super().generate_span_id()

    return _RunIds()


def run_ids(run_id: int, token: str) -> tuple[int, int]:
    """The run's trace id and span id; ``token`` (the run's creation time) keeps a run of a
    reset database from joining an older run's trace."""
    digest = hashlib.sha256(f"evalplatform-run:{run_id}:{token}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def _run_context(run_id: int, token: str) -> Any:
    from opentelemetry import trace

    trace_id, span_id = run_ids(run_id, token)
    parent = trace.SpanContext(
        trace_id=trace_id,
        span_id=span_id,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


@contextmanager
def piece_span(
    *, run_id: int, token: str, piece: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """The current span while one piece of run ``run_id`` is processed (none when off)."""
    tracer = _tracer()
    if tracer is None:
        yield
        return
    attrs = {"run.id": run_id, "run.piece": piece, **(attributes or {})}
    with tracer.start_as_current_span(
        f"piece {piece or 'all'}", context=_run_context(run_id, token), attributes=attrs
    ):
        yield


def export_run(
    *,
    run_id: int,
    token: str,
    started: datetime | None,
    ended: datetime,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """Export the run's own span (its pieces' parent), once, when the run has ended."""
    tracer = _tracer()
    if tracer is None:
        return
    begin = started or ended
    ids = _forced_ids.set(run_ids(run_id, token))
    try:
        span = tracer.start_span(
            f"run #{run_id}",
            context=_empty_context(),
            attributes={"run.id": run_id, **(attributes or {})},
            start_time=_ns(begin),
        )
    finally:
        _forced_ids.reset(ids)
    span.end(end_time=_ns(ended))


def _empty_context() -> Any:
    from opentelemetry.context import Context

    return Context()


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1e9)


class CallSpan:
    """The span of one request a judge sends (an attempt), ended with how it went."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def end(
        self,
        *,
        status: str,
        tokens_in: int,
        tokens_out: int,
        tokens_cached: int,
        tokens_reasoning: int,
        latency_ms: float,
        error: str = "",
    ) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        span.set_attributes(
            {
                "judge.outcome": status,
                "judge.latency_ms": latency_ms,
                "gen_ai.usage.input_tokens": tokens_in,
                "gen_ai.usage.output_tokens": tokens_out,
                "gen_ai.usage.cached_input_tokens": tokens_cached,
                "gen_ai.usage.reasoning_tokens": tokens_reasoning,
            }
        )
        if status == "ok":
            span.set_status(Status(StatusCode.OK))
        else:
            span.set_status(Status(StatusCode.ERROR, f"{status}: {error}"[:500]))
        span.end()


def call_span(*, judge: str, model: str, vote_number: int, attempt: int) -> CallSpan | None:
    """Start the span of a request about to go out, under the current piece; ``None`` when
    tracing is off."""
    tracer = _tracer()
    if tracer is None:
        return None
    span = tracer.start_span(
        "judge call",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "judge.name": judge,
            "judge.vote_number": vote_number,
            "judge.attempt": attempt,
        },
    )
    return CallSpan(span)
