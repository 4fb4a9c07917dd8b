"""The judge cache: a valid answer is stored once, so re-asking the same question costs nothing.

:class:`JudgeCache` is synchronous. A cache that also offers coroutine methods ``aget``/``aput``
(see :class:`AsyncJudgeCache`) is awaited instead, which is how the database-backed cache stays
safe inside an event loop. Errors are never cached.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol, runtime_checkable


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
