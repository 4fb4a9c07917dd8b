"""The generic structured-output LLM caller shared by every judged benchmark.

One function, :func:`structured_call`, asks an OpenAI-compatible chat-completions endpoint for
a JSON answer that must parse into a pydantic model. Around the call it provides what every
judge needs:

* a cache keyed on judge, model, prompt version, prompt text, vote number and whatever else of
  the request can change an answer (response format, temperature): a valid answer is stored
  once and re-asking the same question costs no call (errors are never cached);
* a bounded answer (``max_answer_tokens``, sent as the parameter the server takes), a per-vote
  ``seed`` and an optional ``temperature``, so runs against a local model can be reproduced;
* retries of transient failures (timeouts, connection errors, HTTP 429 and 5xx) with
  exponential backoff and full jitter;
* context overflows told apart from other errors (:class:`ContextOverflow`): when requests in
  flight together overflowed a shared context the shared :class:`AdaptiveLimiter` narrows and
  the call is retried; when this request alone does not fit, the caller may split its batch;
* one re-ask when the answer was cut at the bound, does not parse or ``validate`` rejects it:
  the original question plus a short correction (never the broken answer, which may be as long
  as the context), then :class:`~scoring.judges.consensus.VoteFailed`;
* a :class:`CallRecord` per attempt (including cache hits) for the cost ledger.

Every :class:`VoteFailed` reason starts with its kind (``[transient]``, ``[context]``, …, see
:mod:`scoring.judges.failures`) so a run can say why it failed and what to change.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from scoring.judges import failures
from scoring.judges.cache import (
    AsyncJudgeCache,
    JudgeCache,
    MemoryJudgeCache,
    cache_get,
    cache_key,
    cache_put,
)
from scoring.judges.consensus import VoteFailed
from scoring.judges.local import local_call
from scoring.judges.records import CallRecord, Recorder
from scoring.judges.server import (
    JSON_OBJECT,
    JSON_SCHEMA,
    PROMPT_ONLY,
    AdaptiveLimiter,
    ContextError,
    ServerProfile,
    context_error,
    error_message,
    is_transient,
)

__all__ = [
    "AsyncJudgeCache",
    "CallRecord",
    "ContextOverflow",
    "JudgeCache",
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

    @property
    def response_format(self) -> str:
        # JUDGE_JSON_MODE forces the fallback; otherwise what the probe found the server takes.
        return JSON_OBJECT if self.json_mode else self.profile.response_format

    def request_options(self, vote_number: int) -> dict[str, Any]:
        """Bound, seed and temperature, each only where the server takes it."""
        options: dict[str, Any] = {self.profile.token_param: self.max_answer_tokens}
        if self.seed is not None and self.profile.send_seed:
            options["seed"] = self.seed + vote_number
        if self.temperature is not None and self.profile.send_temperature:
            options["temperature"] = self.temperature
        return options

    def sampling_record(self) -> dict[str, Any]:
        """What a run records about how it asked (so it can be reproduced)."""
        return {
            "response_format": self.response_format,
            "max_answer_tokens": self.max_answer_tokens,
            "token_param": self.profile.token_param,
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
    if http_client is not None:
        kwargs["http_client"] = http_client
    return openai.AsyncOpenAI(**kwargs)


def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the strict form OpenAI structured outputs require."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: fix(v) for k, v in node.items() if k not in ("default", "title")}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    result: dict[str, Any] = fix(schema.model_json_schema())
    return result


def _response_format(config: LLMConfig, schema: type[BaseModel]) -> dict[str, Any] | None:
    mode = config.response_format
    if mode == JSON_OBJECT:
        return {"type": "json_object"}
    if mode == PROMPT_ONLY:
        return None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": strict_json_schema(schema),
            "strict": True,
        },
    }


def _system_text(config: LLMConfig, system: str, schema: type[BaseModel]) -> str:
    if config.response_format == JSON_SCHEMA:
        return system
    # Without json_schema the server guarantees at most *some* JSON: the schema travels in the
    # prompt.
    return (
        f"{system}\n\nAnswer with a single JSON object, no prose, matching this JSON schema:\n"
        f"{json.dumps(strict_json_schema(schema), sort_keys=True)}"
    )


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


def _parse(schema: type[M], content: str | None) -> tuple[M | None, str]:
    """The parsed answer, or a *short* description of the problem (never the answer itself)."""
    if not content:
        return None, "empty answer"
    text = content.strip()
    if text.startswith("```"):
        # Some compatible servers wrap JSON in a code fence even in JSON mode.
        text = text.strip("`")
        text = text[text.find("{") :] if "{" in text else text
    try:
        return schema.model_validate_json(text), ""
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False, include_context=False)[:3]
        ]
        return None, f"answer does not match {schema.__name__}: {'; '.join(problems)}"[:300]


def _correction(problem: str, *, truncated: bool, bound: int) -> str:
    if truncated:
        return (
            f"\n\nNote: a previous answer to this question was invalid: it was cut off after "
            f"{bound} tokens. Answer again with only the JSON object and keep every text field "
            "to at most three short sentences."
        )
    return (
        f"\n\nNote: a previous answer to this question was invalid ({problem}). Answer again, "
        "following the instructions and the JSON schema exactly, with only the JSON object."
    )


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
    limiter: AdaptiveLimiter | None = None,
) -> M:
    """Ask for one vote; return the parsed answer or raise :class:`VoteFailed`.

    ``vote_number`` is part of the cache key and picks the vote's seed: votes 1, 2 and 3 of the
    same question are independent, reproducible samples that are each cached. ``limiter`` gates
    the HTTP request only (cache hits never wait for a slot).
    """
    key = cache_key(
        judge=judge_name,
        model=config.model,
        prompt_version=_key_version(config, prompt_version),
        prompt_text=f"{system}\n\n{user}",
        vote_number=vote_number,
    )

    def emit(
        attempt: int, started: float, status: str, tin: int = 0, tout: int = 0, err: str = ""
    ) -> None:
        if record is not None:
            record(
                CallRecord(
                    judge=judge_name,
                    model=config.model,
                    prompt_hash=key,
                    vote_number=vote_number,
                    attempt=attempt,
                    latency_ms=round((time.perf_counter() - started) * 1000, 3),
                    tokens_in=tin,
                    tokens_out=tout,
                    status=status,
                    error=err[:2000],
                )
            )

    started = time.perf_counter()
    cached = await cache_get(cache, key)
    if cached is not None:
        parsed, _ = _parse(schema, json.dumps(cached))
        if parsed is not None and not (validate and validate(parsed)):
            emit(0, started, "cached")
            return parsed

    system_text = _system_text(config, system, schema)
    response_format = _response_format(config, schema)
    user_text = user
    attempt = 0
    transient_retries = 0
    shared_context_retries = 0
    invalid_asks = 0
    while True:
        attempt += 1
        messages = [
            {"role": "system", "content": system_text},
            {"role": "user", "content": user_text},
        ]
        kwargs: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "timeout": config.timeout_s,
            **config.request_options(vote_number),
        }
        if response_format is not None:
            kwargs["response_format"] = response_format
        gate: AbstractAsyncContextManager[Any] = (
            limiter.slot() if limiter is not None else nullcontext()
        )
        started = time.perf_counter()
        try:
            async with gate:
                create: Any = client.chat.completions.create
                response = await create(**kwargs)
        except Exception as exc:
            message = error_message(exc)
            emit(attempt, started, "error", err=message)
            overflow = context_error(exc)
            if (
                overflow is not None
                and overflow.shared
                and shared_context_retries < _SHARED_CONTEXT_RETRIES
            ):
                # Requests in flight together overflowed the server's shared context: narrow
                # to one call at a time and ask again, instead of retrying at the same width
                # into the same wall.
                if limiter is not None:
                    limiter.narrow()
                shared_context_retries += 1
                await sleep(backoff_delay(config, shared_context_retries - 1))
                continue
            if overflow is not None:
                sizes = ""
                if overflow.prompt_tokens and overflow.context_tokens:
                    sizes = (
                        f" (prompt {overflow.prompt_tokens:,} tokens, context "
                        f"{overflow.context_tokens:,})"
                    )
                raise ContextOverflow(
                    failures.tag(failures.CONTEXT, f"{message}{sizes}"), detail=overflow
                ) from exc
            if is_transient(exc) and transient_retries < config.max_retries:
                await sleep(backoff_delay(config, transient_retries))
                transient_retries += 1
                continue
            kind = failures.TRANSIENT if is_transient(exc) else failures.REJECTED
            raise VoteFailed(failures.tag(kind, message)) from exc

        if limiter is not None:
            limiter.succeeded()
        usage = getattr(response, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        choice = response.choices[0] if response.choices else None
        content = choice.message.content if choice is not None else None
        truncated = getattr(choice, "finish_reason", None) == "length"
        if truncated:
            parsed, problem = None, f"answer cut at the bound of {config.max_answer_tokens} tokens"
        else:
            parsed, problem = _parse(schema, content)
            if parsed is not None and validate is not None:
                problem = validate(parsed) or ""
        if parsed is not None and not problem:
            emit(attempt, started, "ok", tin, tout)
            await cache_put(
                cache,
                key,
                parsed.model_dump(mode="json"),
                judge=judge_name,
                model=config.model,
                prompt_version=_key_version(config, prompt_version),
                vote_number=vote_number,
            )
            return parsed
        emit(attempt, started, "truncated" if truncated else "invalid", tin, tout, problem)
        if invalid_asks >= 1:
            kind = failures.TRUNCATED if truncated else failures.INVALID
            raise VoteFailed(failures.tag(kind, f"invalid answer twice: {problem}"))
        invalid_asks += 1
        user_text = user + _correction(problem, truncated=truncated, bound=config.max_answer_tokens)
