"""The generic structured-output LLM caller shared by every judged benchmark.

One function, :func:`structured_call`, asks an OpenAI-compatible chat-completions endpoint for
a JSON answer that must parse into a pydantic model. Around the call it provides what every
judge needs:

* a cache keyed on judge, model, prompt version, prompt text and vote number: a valid answer
  is stored once and re-asking the same question costs no call (errors are never cached);
* retries of transient failures (timeouts, connection errors, HTTP 429 and 5xx) with
  exponential backoff and full jitter;
* one re-ask when the answer does not parse or ``validate`` rejects it, then
  :class:`~scoring.judges.consensus.VoteFailed`;
* a :class:`CallRecord` per attempt (including cache hits) for the cost ledger.

Caches: :class:`JudgeCache` is synchronous. A cache that also offers coroutine methods
``aget``/``aput`` (see :class:`AsyncJudgeCache`) is awaited instead, which is how the
database-backed cache stays safe inside an event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import openai
from pydantic import BaseModel, ValidationError

from scoring.judges.consensus import VoteFailed

M = TypeVar("M", bound=BaseModel)

Recorder = Callable[["CallRecord"], None]
Sleep = Callable[[float], Awaitable[None]]


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


@dataclass
class CallRecord:
    judge: str
    model: str
    prompt_hash: str
    vote_number: int
    attempt: int
    latency_ms: float
    tokens_in: int
    tokens_out: int
    status: str  # "ok" | "cached" | "invalid" | "error"
    error: str = ""


class JudgeCache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        judge: str,
        model: str,
        prompt_version: str,
        vote_number: int,
    ) -> None: ...


@runtime_checkable
class AsyncJudgeCache(Protocol):
    """Optional: a cache whose storage must not be touched from inside the event loop."""

    async def aget(self, key: str) -> dict[str, Any] | None: ...

    async def aput(
        self,
        key: str,
        value: dict[str, Any],
        *,
        judge: str,
        model: str,
        prompt_version: str,
        vote_number: int,
    ) -> None: ...


class MemoryJudgeCache:
    """A process-local cache: for tests, scripts and one-off evaluations."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self.meta: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.entries.get(key)
        return json.loads(json.dumps(value)) if value is not None else None

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        judge: str,
        model: str,
        prompt_version: str,
        vote_number: int,
    ) -> None:
        self.entries[key] = json.loads(json.dumps(value))
        self.meta[key] = {
            "judge": judge,
            "model": model,
            "prompt_version": prompt_version,
            "vote_number": vote_number,
        }

    def __len__(self) -> int:
        return len(self.entries)


def cache_key(
    *, judge: str, model: str, prompt_version: str, prompt_text: str, vote_number: int
) -> str:
    """sha256 over every input that can change an answer (fields are length-prefixed)."""
    h = hashlib.sha256()
    for part in (judge, model, prompt_version, str(vote_number), prompt_text):
        data = part.encode("utf-8")
        h.update(f"{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


async def cache_get(cache: JudgeCache | None, key: str) -> dict[str, Any] | None:
    if cache is None:
        return None
    if isinstance(cache, AsyncJudgeCache):
        return await cache.aget(key)
    return cache.get(key)


async def cache_put(
    cache: JudgeCache | None,
    key: str,
    value: dict[str, Any],
    *,
    judge: str,
    model: str,
    prompt_version: str,
    vote_number: int,
) -> None:
    if cache is None:
        return
    if isinstance(cache, AsyncJudgeCache):
        await cache.aput(
            key,
            value,
            judge=judge,
            model=model,
            prompt_version=prompt_version,
            vote_number=vote_number,
        )
    else:
        cache.put(
            key,
            value,
            judge=judge,
            model=model,
            prompt_version=prompt_version,
            vote_number=vote_number,
        )


def make_client(config: LLMConfig, http_client: Any = None) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client whose own retries are off: :func:`structured_call` retries."""
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


def _response_format(config: LLMConfig, schema: type[BaseModel]) -> dict[str, Any]:
    if config.json_mode:
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": strict_json_schema(schema),
            "strict": True,
        },
    }


def _system_text(config: LLMConfig, system: str, schema: type[BaseModel]) -> str:
    if not config.json_mode:
        return system
    # JSON mode only guarantees *some* JSON object: the schema has to travel in the prompt.
    return (
        f"{system}\n\nAnswer with a single JSON object, no prose, matching this JSON schema:\n"
        f"{json.dumps(strict_json_schema(schema), sort_keys=True)}"
    )


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, asyncio.TimeoutError)


def backoff_delay(config: LLMConfig, retry: int, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(max, base * 2**retry)]."""
    cap = min(config.backoff_max_s, config.backoff_base_s * (2**retry))
    return (rng or random).uniform(0, cap)


def _parse(schema: type[M], content: str | None) -> tuple[M | None, str]:
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
        return None, f"answer does not match {schema.__name__}: {exc.errors()[:3]}"


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
) -> M:
    """Ask for one vote; return the parsed answer or raise :class:`VoteFailed`.

    ``vote_number`` is part of the cache key and is sent nowhere else: votes 1, 2 and 3 of the
    same question are independent samples that are each cached.
    """
    key = cache_key(
        judge=judge_name,
        model=config.model,
        prompt_version=prompt_version,
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

    messages: list[dict[str, str]] = [
        {"role": "system", "content": _system_text(config, system, schema)},
        {"role": "user", "content": user},
    ]
    attempt = 0
    transient_retries = 0
    invalid_asks = 0
    while True:
        attempt += 1
        started = time.perf_counter()
        try:
            create: Any = client.chat.completions.create
            response = await create(
                model=config.model,
                messages=messages,
                response_format=_response_format(config, schema),
                timeout=config.timeout_s,
            )
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            emit(attempt, started, "error", err=message)
            if is_transient(exc) and transient_retries < config.max_retries:
                await sleep(backoff_delay(config, transient_retries))
                transient_retries += 1
                continue
            raise VoteFailed(message) from exc

        usage = getattr(response, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        content = response.choices[0].message.content if response.choices else None
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
                prompt_version=prompt_version,
                vote_number=vote_number,
            )
            return parsed
        emit(attempt, started, "invalid", tin, tout, problem)
        if invalid_asks >= 1:
            raise VoteFailed(f"invalid answer twice: {problem}")
        invalid_asks += 1
        messages = [
            *messages,
            {"role": "assistant", "content": content or ""},
            {
                "role": "user",
                "content": f"Your answer was invalid: {problem}. Answer again, following "
                "the instructions and the JSON schema exactly.",
            },
        ]


async def local_call(
    *,
    judge_name: str,
    model: str,
    prompt_version: str,
    prompt_text: str,
    vote_number: int,
    compute: Callable[[], M] | Callable[[], Awaitable[M]],
    schema: type[M],
    cache: JudgeCache | None = None,
    record: Recorder | None = None,
    validate: Callable[[M], str | None] | None = None,
) -> M:
    """The same cache, ledger and validation contract for judges that need no network.

    Deterministic judges give the same answer when re-asked, so an invalid verdict fails the
    vote after the second identical answer.
    """
    key = cache_key(
        judge=judge_name,
        model=model,
        prompt_version=prompt_version,
        prompt_text=prompt_text,
        vote_number=vote_number,
    )

    def emit(attempt: int, started: float, status: str, err: str = "") -> None:
        if record is not None:
            record(
                CallRecord(
                    judge=judge_name,
                    model=model,
                    prompt_hash=key,
                    vote_number=vote_number,
                    attempt=attempt,
                    latency_ms=round((time.perf_counter() - started) * 1000, 3),
                    tokens_in=0,
                    tokens_out=0,
                    status=status,
                    error=err[:2000],
                )
            )

    started = time.perf_counter()
    cached = await cache_get(cache, key)
    if cached is not None:
        try:
            hit = schema.model_validate(cached)
        except ValidationError:
            hit = None
        if hit is not None and not (validate and validate(hit)):
            emit(0, started, "cached")
            return hit
    problem = ""
    for attempt in (1, 2):
        started = time.perf_counter()
        try:
            value = compute()
            answer: M = await value if inspect.isawaitable(value) else value
        except VoteFailed as exc:
            emit(attempt, started, "error", exc.reason)
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            emit(attempt, started, "error", message)
            raise VoteFailed(message) from exc
        problem = (validate(answer) if validate else None) or ""
        if not problem:
            emit(attempt, started, "ok")
            await cache_put(
                cache,
                key,
                answer.model_dump(mode="json"),
                judge=judge_name,
                model=model,
                prompt_version=prompt_version,
                vote_number=vote_number,
            )
            return answer
        emit(attempt, started, "invalid", problem)
    raise VoteFailed(f"invalid answer twice: {problem}")
