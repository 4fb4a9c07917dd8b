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

Every :class:`VoteFailed` reason starts with its kind (``[transient]``, ``[context]``, …, see
:mod:`scoring.judges.failures`) so a run can say why it failed and what to change.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
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
    JSON_OBJECT,
    JSON_SCHEMA,
    AdaptiveLimiter,
    ContextError,
    ServerProfile,
    context_error,
    error_message,
    is_transient,
    prompt_cut,
    raw_error,
)
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
    "is_transient",
    "local_call",
    "make_client",
    "strict_json_schema",
    "structured_call",
]

M = TypeVar("M", bound=BaseModel)

Sleep = Callable[[float], Awaitable[None]]

# The smallest answer bound worth asking with (a verdict is ~100-300 tokens), and the tokens a
# chat template adds around the messages.
_MIN_BOUND = 256
_TEMPLATE_TOKENS = 64
# The share of the timeout an answer of the full bound may take at the server's speed.
_SPEED_MARGIN = 0.8

# How often a call is retried after narrowing the concurrency on a shared-context overflow.
_SHARED_CONTEXT_RETRIES = 3


@dataclass
class LLMConfig:
    model: str
    api_key: str = ""
    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    json_mode: bool = False
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    # Bound on every answer. Reasoning models spend hidden reasoning tokens from the same
    # budget, so the default leaves them room while a looping local model still stops.
    max_answer_tokens: int = 4096
    temperature: float | None = None
    seed: int | None = 0  # vote n is sent seed + n; None sends no seed
    profile: ServerProfile = field(default_factory=ServerProfile)
    # How long a call waits out a judge that answers nothing before the run pauses, and how
    # many transient failures in a row (no answer in between) make it an outage.
    outage_patience_s: float = 300.0
    breaker_threshold: int = 5
    # Stream answers: a request given up on is then stopped on the server (the connection
    # closes), and a slow server is told apart from a dead one by the tokens it sent.
    stream: bool = True

    @property
    def response_format(self) -> str:
        # JUDGE_JSON_MODE forces the fallback; otherwise what the probe found the server takes.
        return JSON_OBJECT if self.json_mode else self.profile.response_format

    def answer_bound(self, prompt_tokens: int = 0) -> int:
        """The bound sent: ``max_answer_tokens``, lowered so that prompt and answer fit the
        context per request where the probe learnt it (llama.cpp, vLLM)."""
        bound = self.max_answer_tokens
        context = self.profile.context_tokens
        if context and prompt_tokens:
            # The estimate counts four characters a token; code and numbers take more.
            room = context - int(prompt_tokens * 1.25) - _TEMPLATE_TOKENS
            bound = min(bound, max(_MIN_BOUND, room))
        return bound

    def request_options(self, vote_number: int, prompt_tokens: int = 0) -> dict[str, Any]:
        """Bound, seed and temperature, each only where the server takes it."""
        options: dict[str, Any] = {self.profile.token_param: self.answer_bound(prompt_tokens)}
        if self.seed is not None and self.profile.send_seed:
            options["seed"] = self.seed + vote_number
        if self.temperature is not None and self.profile.send_temperature:
            options["temperature"] = self.temperature
        return options

    @property
    def streams(self) -> bool:
        return self.stream and self.profile.stream

    def request_record(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """What the ledger keeps of one request's options (not its messages)."""
        fmt = kwargs.get("response_format")
        record = {
            k: kwargs[k]
            for k in ("model", "temperature", "seed", "max_tokens", "max_completion_tokens")
            if k in kwargs
        }
        record["response_format"] = fmt.get("type") if isinstance(fmt, dict) else "none"
        record["stream"] = self.streams
        return record

    def sampling_record(self) -> dict[str, Any]:
        """What a run records about how it asked (so it can be reproduced)."""
        return {
            "response_format": self.response_format,
            "max_answer_tokens": self.max_answer_tokens,
            "token_param": self.profile.token_param,
            "stream": self.streams,
            "temperature": self.temperature if self.profile.send_temperature else None,
            "seed": (
                f"{self.seed} + vote number"
                if self.seed is not None and self.profile.send_seed
                else None
            ),
            "probe": self.profile.as_dict(),
        }


class ContextOverflow(VoteFailed):
    """This request alone does not fit the server's context: ask about fewer candidates."""

    def __init__(self, reason: str, *, detail: ContextError) -> None:
        super().__init__(reason)
        self.detail = detail


def make_client(config: LLMConfig, http_client: Any = None) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client whose own retries are off: :func:`structured_call` retries.

    The client's pooled connections belong to the event loop that first used them: create one
    client per loop (per run) and close it in that loop.
    """
    kwargs: dict[str, Any] = {
        "api_key": config.api_key or "not-needed",
        "timeout": config.timeout_s,
        "max_retries": 0,
    }
    if config.base_url:
        kwargs["base_url"] = config.base_url
    import openai  # only where a client is made: importing the judges stays light

    # The process's one verifying TLS context, not one per client (see _tls_context).
    kwargs["http_client"] = http_client or openai.DefaultAsyncHttpxClient(verify=_tls_context())
    return openai.AsyncOpenAI(**kwargs)


@functools.lru_cache(maxsize=1)
def _tls_context() -> Any:
    """The TLS context every client of this process verifies servers with (the client
    library's default one, made once).

    Making one loads the CA bundle: about 50 ms of CPU, holding the GIL. A worker that drives
    eleven run pieces builds eleven clients at once, and no call went out for half a second.
    A context is safe to share between clients, threads and event loops.
    """
    import httpx2  # the client library's HTTP layer, imported with it

    return httpx2.create_ssl_context()


def client_warm_up() -> None:
    """Load the client library and its TLS context now, before a process builds many clients
    at once (each would otherwise wait on the import lock and the GIL)."""
    import openai  # noqa: F401

    _tls_context()


def fit_to_server(config: LLMConfig) -> list[str]:
    """Lower the answer bound to what the probed server can produce within the timeout.

    Only a speed the server itself reported (llama.cpp's timings) is trusted: the probe's own
    measure of a 16-token answer includes the network and the prompt, and would cut a remote
    reasoning model's room for no reason. Returns what was changed, in words for the run.
    """
    p = config.profile
    notes: list[str] = []
    if p.tokens_per_s and p.speed_source == "server":
        fits = int(p.tokens_per_s * config.timeout_s * _SPEED_MARGIN)
        if fits < config.max_answer_tokens:
            new = max(_MIN_BOUND // 4, fits)
            notes.append(
                f"answer bound lowered from {config.max_answer_tokens} to {new} tokens: the "
                f"server generates about {p.tokens_per_s:g} tokens/s, and JUDGE_TIMEOUT_S="
                f"{config.timeout_s:g} leaves room for no more (lower JUDGE_MAX_ANSWER_TOKENS "
                "or raise JUDGE_TIMEOUT_S to choose)"
            )
            config.max_answer_tokens = new
    if p.context_tokens and config.max_answer_tokens >= p.context_tokens:
        notes.append(
            f"JUDGE_MAX_ANSWER_TOKENS={config.max_answer_tokens} alone fills the server's "
            f"context of {p.context_tokens} tokens per request: each request's bound is "
            "lowered to what its prompt leaves"
        )
    return notes


def _key_version(config: LLMConfig, prompt_version: str) -> str:
    # The cache key must follow what was actually sent. The default request (json_schema, no
    # temperature) keeps the historical key so existing caches stay valid.
    suffix = ""
    if config.response_format != JSON_SCHEMA:
        suffix += f"|{config.response_format}"
    if config.temperature is not None and config.profile.send_temperature:
        suffix += f"|t={config.temperature}"
    return prompt_version + suffix


def backoff_delay(config: LLMConfig, retry: int, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(max, base * 2**retry)]."""
    cap = min(config.backoff_max_s, config.backoff_base_s * (2**retry))
    return (rng or random).uniform(0, cap)


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
    version = _key_version(config, prompt_version)
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
    fmt = response_format(config.response_format, q.schema)
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
                async with gate as admitted:
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
                    raise VoteFailed(failures.tag(failures.SLOW, _slow(config, error))) from error
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
                    raise _overflow(message, overflow, config.max_answer_tokens) from error
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
                )
                raise ContextOverflow(
                    failures.tag(failures.PROMPT_CUT, _cut_reason(cut, config)), detail=cut
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
            usage = Usage(tin, tout, reply.tokens_reasoning)
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
    )
    if not ended:
        await cache_put(q.cache, q.key, value, **meta)
    q.flight.answered(value)


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int
    reasoning: int = 0


def _slow(config: LLMConfig, timeout: AnswerTimeout) -> str:
    speed = timeout.tokens / timeout.seconds if timeout.seconds > 0 else 0.0
    need = config.max_answer_tokens / speed if speed > 0 else 0.0
    return (
        f"{timeout}; an answer of up to {config.max_answer_tokens} tokens "
        f"(JUDGE_MAX_ANSWER_TOKENS) needs about {need:.0f} s at that speed, more than "
        f"JUDGE_TIMEOUT_S={config.timeout_s:.0f}"
    )


def _cut_reason(cut: ContextError, config: LLMConfig) -> str:
    if config.profile.server == "ollama":
        return (
            f"Ollama at {config.base_url}: {cut.message}; raise its context "
            "(OLLAMA_CONTEXT_LENGTH=N ollama serve, or the model's num_ctx)"
        )
    return f"the server at {config.base_url}: {cut.message}; give it a larger context"


def _overflow(message: str, overflow: ContextError, bound: int = 0) -> ContextOverflow:
    sizes = ""
    if overflow.prompt_tokens and overflow.context_tokens:
        sizes = f" (prompt {overflow.prompt_tokens:,} tokens, context {overflow.context_tokens:,})"
    if bound and overflow.context_tokens and bound >= overflow.context_tokens:
        # No split can help: the answer bound alone takes the whole context.
        message = (
            f"the answer bound alone fills the context: JUDGE_MAX_ANSWER_TOKENS={bound:,} "
            f"against a context of {overflow.context_tokens:,} tokens per request; lower "
            f"JUDGE_MAX_ANSWER_TOKENS or give the server a larger context ({message})"
        )
    return ContextOverflow(failures.tag(failures.CONTEXT, f"{message}{sizes}"), detail=overflow)
