"""The judge cache: a valid answer is stored once, so re-asking the same question costs nothing.

:class:`JudgeCache` is synchronous. A cache that also offers coroutine methods ``aget``/``aput``
(see :class:`AsyncJudgeCache`) is awaited instead, which is how the database-backed cache stays
safe inside an event loop. Errors are never cached.

A cache whose storage is the ledger's (``joins_ledger_transaction = True``, the database
cache) has its write of a fresh answer run by the ledger, in the transaction that completes
the call's row (see :func:`ledger_write`). A cache may also offer ``aflight(key, ttl_s=...)``
for single flight across processes (see :mod:`scoring.judges.flight`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
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
    write = CacheWrite(cache, key, value, judge, model, prompt_version, vote_number)
    if isinstance(cache, AsyncJudgeCache):
        await cache.aput(key, value, **write.labels())
    else:
        write()


@dataclass
class CacheWrite:
    """One fresh answer's cache write, run by the ledger in the transaction of its ``ok`` row.

    Calling it writes through ``cache.put``; a ledger completing several calls at once hands
    a cache that offers ``put_many(writes)`` all of its writes together.
    """

    cache: Any
    key: str
    value: dict[str, Any]
    judge: str
    model: str
    prompt_version: str
    vote_number: int

    def labels(self) -> dict[str, Any]:
        """What the answer is stored under besides its key: ``put``'s keyword arguments."""
        return {
            "judge": self.judge,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "vote_number": self.vote_number,
        }

    def __call__(self) -> None:
        self.cache.put(self.key, self.value, **self.labels())


def ledger_write(
    cache: JudgeCache | None,
    key: str,
    value: dict[str, Any],
    *,
    judge: str,
    model: str,
    prompt_version: str,
    vote_number: int,
) -> Callable[[], None] | None:
    """The cache write as a plain function for the ledger to run in its own transaction.

    ``None`` when the cache does not share the ledger's storage: the caller then writes with
    :func:`cache_put` as usual.
    """
    if cache is None or not getattr(cache, "joins_ledger_transaction", False):
        return None
    return CacheWrite(cache, key, value, judge, model, prompt_version, vote_number)
