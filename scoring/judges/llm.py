"""The generic structured-output LLM caller shared by every judged benchmark.

One function, :func:`structured_call`, asks an OpenAI-compatible chat-completions endpoint for
a JSON answer that must parse into a pydantic model. Around the call it provides what every
judge needs:

* a cache keyed on judge, model, prompt version, prompt text, vote number and whatever else of
  the request can change an answer (response format, temperature): a valid answer is stored
  once and re-asking the same question costs no call (errors are never cached);
* single flight (:mod:`scoring.judges.flight`): while a question is being asked, every other
  caller that needs it, in this process or (through the cache) anywhere on the site, waits for
  that answer instead of paying for it again;
* a bounded answer (``max_answer_tokens``, sent as the parameter the server takes), a per-vote
  ``seed`` and an optional ``temperature``, so runs against a local model can be reproduced;
* retries of transient failures (timeouts, connection errors, HTTP 429 and 5xx) with
  exponential backoff and full jitter, at most ``max_retries`` while the judge answers other
  calls; when it answers none, a circuit breaker (:mod:`scoring.judges.outage`) lets one probe
  at a time through for up to ``outage_patience_s``, and then
  :class:`~scoring.judges.failures.JudgeUnavailable` (not a failed vote) pauses the run;
* permanent refusals (bad credentials, unknown model, rejected request) fail the vote at once;
* context overflows told apart from other errors (:class:`ContextOverflow`): when requests in
  flight together overflowed a shared context the shared :class:`AdaptiveLimiter` narrows and
  the call is retried; when this request alone does not fit, the caller may split its batch
  (a prompt the server cut to its context without saying so, as Ollama does, is told the same
  way, from the prompt tokens it reports: :func:`~scoring.judges.server.prompt_cut`);
* one re-ask when the answer was cut at the bound, does not parse or ``validate`` rejects it:
  the original question plus a short correction (never the broken answer, which may be as long
  as the context), then :class:`~scoring.judges.consensus.VoteFailed`;
* a :class:`CallRecord` per attempt (including cache hits) for the cost ledger; a durable
  ledger (:class:`~scoring.judges.records.DurableRecorder`) has each attempt as pending before
  the request goes out, and completes it with the cache write in one transaction.

The configuration, the client and the failures on the server's limits are in ``llm_config``,
``llm_client`` and ``llm_failures`` beside this module, the slot a call is pinned to on
llama.cpp in ``slots``: what is left here is one concern, the call and its retry loop, read top
to bottom (and the names the judges import, re-exported).

Every :class:`VoteFailed` reason starts with its kind (``[transient]``, ``[context]``, …, see
:mod:`scoring.judges.failures`) so a run can say why it failed and what to change.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from scoring.judges import failures
from scoring.judges.cache import (
    AsyncJudgeCache,
    JudgeCache,
    MemoryJudgeCache,
    cache_get,
    cache_key,
    cache_put,
    ledger_write,
)
from scoring.judges.consensus import VoteFailed
from scoring.judges.failures import JudgeUnavailable
from scoring.judges.flight import Flight, single_flight
from scoring.judges.limits import CallGate, estimate_tokens, retry_after_s
from scoring.judges.llm_client import client_warm_up, make_client
from scoring.judges.llm_config import LLMConfig, backoff_delay, fit_to_server, key_version
from scoring.judges.llm_failures import ContextOverflow, cut_reason, overflow_error, slow_reason
from scoring.judges.local import local_call
from scoring.judges.outage import Patience, breaker_for
from scoring.judges.records import (
    ABANDONED,
    CallLedger,
    CallRecord,
    DurableRecorder,
    Prompt,
    Recorder,
)
from scoring.judges.reply import AnswerTimeout, ServerFault, send
from scoring.judges.server import (
    AdaptiveLimiter,
    context_error,
    error_message,
    is_transient,
    prompt_cut,
    raw_error,
)
from scoring.judges.slots import slot_pin
from scoring.judges.wire import (
    correction,
    parse_answer,
    response_format,
    strict_json_schema,
    system_text,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "AsyncJudgeCache",
    "CallRecord",
    "ContextOverflow",
    "DurableRecorder",
    "JudgeCache",
    "JudgeUnavailable",
    "LLMConfig",
    "MemoryJudgeCache",
    "Recorder",
    "backoff_delay",
    "cache_get",
    "cache_key",
    "cache_put",
    "client_warm_up",
    "fit_to_server",
    "is_transient",
    "local_call",
    "make_client",
    "strict_json_schema",
    "structured_call",
]

M = TypeVar("M", bound=BaseModel)

Sleep = Callable[[float], Awaitable[None]]

# How often a call is retried after narrowing the concurrency on a shared-context overflow.
_SHARED_CONTEXT_RETRIES = 3


def _usable(
    schema: type[M], value: dict[str, Any] | None, validate: Callable[[M], str | None] | None
) -> M | None:
    """A stored answer that still parses and validates, else ``None`` (then it is asked)."""
    if value is None:
        return None
    parsed, _ = parse_answer(schema, json.dumps(value))
    if parsed is None or (validate is not None and validate(parsed)):
        return None
    return parsed


async def structured_call(
    client: openai.AsyncOpenAI,
    *,
    config: LLMConfig,
    judge_name: str,
    prompt_version: str,
    system: str,
    user: str,
    schema: type[M],
    vote_number: int,
    cache: JudgeCache | None = None,
    record: Recorder | None = None,
    validate: Callable[[M], str | None] | None = None,
    sleep: Sleep = asyncio.sleep,
    limiter: AdaptiveLimiter | CallGate | None = None,
) -> M:
    """Ask for one vote; return the parsed answer or raise :class:`VoteFailed`.

    ``vote_number`` is part of the cache key and picks the vote's seed: votes 1, 2 and 3 of the
    same question are independent, reproducible samples that are each cached. ``limiter`` gates
    the HTTP request only (cache hits never wait for a slot). Raises :class:`JudgeUnavailable`
    when the judge answered nothing for ``config.outage_patience_s``.
    """
    version = key_version(config, prompt_version)
    key = cache_key(
        judge=judge_name,
        model=config.model,
        prompt_version=version,
        prompt_text=f"{system}\n\n{user}",
        vote_number=vote_number,
    )
    ledger = CallLedger(
        record,
        judge=judge_name,
        model=config.model,
        prompt_hash=key,
        vote_number=vote_number,
        prompt=Prompt(system, user),
    )
    started = time.perf_counter()
    hit = _usable(schema, await cache_get(cache, key), validate)
    if hit is not None:
        ledger.cached(started)
        return hit
    ttl = config.timeout_s + config.backoff_max_s + _FLIGHT_MARGIN_S
    async with single_flight(cache, key, ttl_s=ttl) as flight:
        hit = _usable(schema, flight.answer, validate)
        if hit is not None:
            ledger.cached(started)
            return hit
        question = _Question(
            config=config,
            judge_name=judge_name,
            version=version,
            key=key,
            system=system,
            user=user,
            schema=schema,
            vote_number=vote_number,
            cache=cache,
            validate=validate,
            ledger=ledger,
            flight=flight,
            limiter=limiter,
            sleep=sleep,
        )
        return await _ask(client, question)


# A claim on a question outlives one attempt (timeout and backoff) by this much.
_FLIGHT_MARGIN_S = 60.0


@dataclass
class _Question(Generic[M]):
    config: LLMConfig
    judge_name: str
    version: str
    key: str
    system: str
    user: str
    schema: type[M]
    vote_number: int
    cache: JudgeCache | None
    validate: Callable[[M], str | None] | None
    ledger: CallLedger
    flight: Flight
    limiter: AdaptiveLimiter | CallGate | None
    sleep: Sleep


async def _ask(client: openai.AsyncOpenAI, q: _Question[M]) -> M:
    """Ask ``q`` over HTTP until it is answered, fails or the judge stays down too long."""
    config = q.config
    breaker = breaker_for(config.base_url, config.model)
    patience = Patience(
        config.outage_patience_s,
        threshold=config.breaker_threshold,
        backoff_base_s=config.backoff_base_s,
        backoff_max_s=config.backoff_max_s,
    )
    system_message = system_text(config.response_format, q.system, q.schema)
    fmt = response_format(config.response_format, q.schema, text_bound=config.text_bound)
    user_text = q.user
    attempt = 0
    transient_retries = 0
    shared_context_retries = 0
    invalid_asks = 0
    async with breaker.used():
        while True:
            attempt += 1
            kwargs: dict[str, Any] = {
                "model": config.model,
                "messages": [
                    {"role": "system", "content": system_message},
                    {"role": "user", "content": user_text},
                ],
                "timeout": config.timeout_s,
                **config.request_options(q.vote_number, estimate_tokens(system_message, user_text)),
            }
            if fmt is not None:
                kwargs["response_format"] = fmt
            q.ledger.request = config.request_record(kwargs)
            await q.flight.renew()
            gate: AbstractAsyncContextManager[Any] = nullcontext()
            if isinstance(q.limiter, CallGate):
                estimate = estimate_tokens(
                    system_message, user_text, answer_tokens=config.max_answer_tokens // 4
                )
                gate = q.limiter.slot(tokens=estimate)
            elif q.limiter is not None:
                gate = q.limiter.slot()
            error: Exception | None = None
            async with breaker.attempt(patience, heartbeat=q.flight.renew) as passage:
                async with gate as admitted, slot_pin(config, system_message, user_text) as slot:
                    if slot is not None:
                        extra = kwargs.get("extra_body", {})
                        kwargs["extra_body"] = {**extra, "id_slot": slot}
                        q.ledger.request = config.request_record(kwargs)
                    ticket = await q.ledger.begin(attempt)
                    started = time.perf_counter()
                    try:
                        reply = await send(
                            client,
                            kwargs,
                            stream=config.streams,
                            timeout_s=config.timeout_s,
                            base_url=config.base_url,
                        )
                    except asyncio.CancelledError:
                        # The run is stopping (another call ran out of patience, or the worker
                        # is shutting down): the row must not stay pending for ever.
                        await q.ledger.end(ticket, attempt, started, "abandoned", err=ABANDONED)
                        raise
                    except Exception as exc:
                        error = exc
                    else:
                        if admitted is not None:
                            # The rate window counts what the server says it used.
                            admitted.entry[1] = float(reply.tokens_in + reply.tokens_out)
                # A server that sent tokens until the timeout is slow, not down; one that sent a
                # body that is not a completion answered (wrongly) all the same.
                slow = isinstance(error, AnswerTimeout) and error.live
                transient = (
                    error is not None
                    and not slow
                    and not isinstance(error, ServerFault)
                    and is_transient(error)
                    and context_error(error) is None
                )
                if transient:
                    passage.failed(error_message(error) if error is not None else "")
                else:
                    passage.answered()

            if isinstance(error, ServerFault):
                message = str(error)
                await q.ledger.end(ticket, attempt, started, "error", err=message, raw=error.raw)
                raise VoteFailed(failures.tag(failures.SERVER, message)) from error
            if slow and isinstance(error, AnswerTimeout):
                await q.ledger.end(
                    ticket, attempt, started, "error", tout=error.tokens, err=str(error)
                )
                if invalid_asks >= 1:
                    raise VoteFailed(
                        failures.tag(failures.SLOW, slow_reason(config, error))
                    ) from error
                invalid_asks += 1
                user_text = q.user + correction("", truncated=True, bound=config.max_answer_tokens)
                continue
            if error is not None:
                message = error_message(error)
                await q.ledger.end(
                    ticket, attempt, started, "error", err=message, raw=raw_error(error)
                )
                overflow = context_error(error)
                if (
                    overflow is not None
                    and overflow.shared
                    and shared_context_retries < _SHARED_CONTEXT_RETRIES
                ):
                    # Requests in flight together overflowed the server's shared context:
                    # narrow to one call at a time and ask again, instead of retrying at the
                    # same width into the same wall.
                    if q.limiter is not None:
                        q.limiter.narrow()
                    shared_context_retries += 1
                    await q.sleep(backoff_delay(config, shared_context_retries - 1))
                    continue
                if overflow is not None:
                    raise overflow_error(message, overflow, config.max_answer_tokens) from error
                if not transient:
                    raise VoteFailed(failures.tag(failures.REJECTED, message)) from error
                patience.start()
                if breaker.is_open:
                    # The judge answers nothing: the breaker paces the next attempt, and this
                    # call's retries no longer count; only its patience does.
                    if patience.exhausted:
                        raise breaker.unavailable(patience) from error
                    continue
                wait = None
                if getattr(error, "status_code", None) == 429:
                    # The provider's own word: every call of the process waits and slows down.
                    wait = retry_after_s(error)
                    throttled = getattr(q.limiter, "throttled", None)
                    if throttled is not None:
                        throttled(wait)
                if transient_retries < config.max_retries:
                    await q.sleep(max(backoff_delay(config, transient_retries), wait or 0.0))
                    transient_retries += 1
                    continue
                raise VoteFailed(failures.tag(failures.TRANSIENT, message)) from error

            if q.limiter is not None:
                q.limiter.succeeded()
            tin, tout = reply.tokens_in, reply.tokens_out
            cut = prompt_cut(
                config.profile,
                estimated=estimate_tokens(system_message, user_text),
                reported=tin,
            )
            if cut is not None:
                # The answer is to a prompt the judge never saw whole (Ollama cuts silently):
                # not cached, and told as a context failure so that the batch splits or the
                # paper is cut to fit, as for a server that says the prompt does not fit.
                await q.ledger.end(
                    ticket,
                    attempt,
                    started,
                    "error",
                    tin,
                    tout,
                    cut.message,
                    raw=reply.raw,
                    reasoning=reply.tokens_reasoning,
                    cached=reply.tokens_cached,
                )
                raise ContextOverflow(
                    failures.tag(failures.PROMPT_CUT, cut_reason(cut, config)), detail=cut
                )
            content = reply.content
            truncated = reply.truncated
            # The bound this request was sent (lowered where its prompt left less room).
            bound = int(kwargs.get(config.profile.token_param) or config.max_answer_tokens)
            if reply.thought_out:
                parsed, problem = None, f"all {bound} tokens of the bound spent reasoning"
            elif truncated:
                parsed, problem = None, f"answer cut at the bound of {bound} tokens"
            elif reply.refusal and not content:
                parsed, problem = None, f"the model refused: {reply.refusal[:200]}"
            else:
                parsed, problem = parse_answer(q.schema, content)
                if parsed is not None and q.validate is not None:
                    problem = q.validate(parsed) or ""
            raw = reply.raw
            usage = Usage(tin, tout, reply.tokens_reasoning, reply.tokens_cached)
            if parsed is not None and not problem:
                value = parsed.model_dump(mode="json")
                await _keep(q, ticket, attempt, started, value, usage, raw)
                return parsed
            status = "truncated" if truncated else "invalid"
            await q.ledger.end(
                ticket,
                attempt,
                started,
                status,
                tin,
                tout,
                problem,
                raw=raw,
                reasoning=reply.tokens_reasoning,
                cached=reply.tokens_cached,
            )
            if reply.thought_out:
                raise VoteFailed(failures.tag(failures.REASONING, problem))
            if invalid_asks >= 1:
                kind = failures.TRUNCATED if truncated else failures.INVALID
                raise VoteFailed(failures.tag(kind, f"invalid answer twice: {problem}"))
            invalid_asks += 1
            user_text = q.user + correction(problem, truncated=truncated, bound=bound)


async def _keep(
    q: _Question[M],
    ticket: Any,
    attempt: int,
    started: float,
    value: dict[str, Any],
    usage: Usage,
    raw: str,
) -> None:
    """Ledger the answer as ok and cache it: in one transaction where the storage allows."""
    meta: dict[str, Any] = {
        "judge": q.judge_name,
        "model": q.config.model,
        "prompt_version": q.version,
        "vote_number": q.vote_number,
    }
    write = ledger_write(q.cache, q.key, value, **meta)
    ended = await q.ledger.end(
        ticket,
        attempt,
        started,
        "ok",
        usage.tokens_in,
        usage.tokens_out,
        raw=raw,
        then=write,
        reasoning=usage.reasoning,
        cached=usage.cached,
    )
    if not ended:
        await cache_put(q.cache, q.key, value, **meta)
    q.flight.answered(value)


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int
    reasoning: int = 0
    cached: int = 0
