"""The judge contract for judges that need no network (offline, replay, recorded)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from scoring.judges import failures
from scoring.judges.cache import JudgeCache, cache_get, cache_key, cache_put
from scoring.judges.consensus import VoteFailed
from scoring.judges.failures import JudgeUnavailable
from scoring.judges.records import CallRecord, Recorder

M = TypeVar("M", bound=BaseModel)


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
        except JudgeUnavailable:
            raise  # an outage pauses the run; it is not this vote's failure
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
    raise VoteFailed(failures.tag(failures.INVALID, f"invalid answer twice: {problem}"))
