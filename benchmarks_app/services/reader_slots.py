"""Site-wide caps on how many participants' files are read at once, across every process.

Reading a paper (PDF, LaTeX, a zip of sources: :mod:`scoring.sandbox`) costs up to its CPU
budget on one core. Without a cap, a few accounts sending files at once held every web worker
and every core, and other visitors' pages waited behind them. A reader holds one of
``PAPER_READERS_MAX`` slots (by default the machine's CPU count) while its child reads; past
them the request is refused at once, 503 with Retry-After, instead of queueing workers that
would stall the site.

The slots are keys of the shared cache (Redis, or the database: ``config.env.caches``), taken
with its atomic ``add``, so the cap holds across web workers, queue workers and machines. A
slot is a lease of ``PAPER_READER_LEASE_S`` renewed while its child reads: a holder that dies
(killed worker, lost machine) frees its slot when the lease runs out.

Result files (audit results and probe responses, CSV or JSON, as a file or a request body) are
parsed in the web worker itself, bounded by ``UPLOAD_MAX_MB``, the row and findings caps and
the field limits: up to 20 MB, a fraction of a second of CPU each. A large one
(``UPLOAD_READ_SLOT_MIN_KB`` and more) holds a slot of a second pool of the same kind,
``UPLOAD_READERS_MAX`` (by default the CPU count), while it is parsed and checked, so that a
few accounts sending 20 MB files back to back cannot keep every core parsing; smaller ones
cost what a page costs and take none. A pool of their own, not the papers' one: a paper holds
its slot for seconds, a file for a fraction of one, and neither should wait behind the other.

Past a cap the answer is 503 Service Unavailable with Retry-After, not 429: the site is out of
capacity for the moment, whoever asks; 429 is kept for a client over its own rate (the API
throttles, ``CHECKLIST_PAPER_CHECKS_PER_HOUR``).
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

SLOT_KEY = "paper-reader-slot:{}"
# What a refused client is told to wait: a paper takes a second or two to read.
BUSY_RETRY_AFTER_S = 5


@dataclass(frozen=True)
class ReaderPool:
    """One cap: its slots' cache keys, the setting sizing it, what it reads (for messages)
    and the wait a refused client is told."""

    key: str
    setting: str
    what: str
    retry_after_s: int


PAPERS = ReaderPool(SLOT_KEY, "PAPER_READERS_MAX", "paper", BUSY_RETRY_AFTER_S)
# A 20 MB results file is parsed in well under a second.
UPLOADS = ReaderPool("upload-reader-slot:{}", "UPLOAD_READERS_MAX", "large uploaded file", 2)


class PaperReadRefused(Exception):
    """A participant's file was not read, for a reason of load, not of the file: ``status`` is
    the HTTP answer (503: a cap of the site's; 429: the user's own rate), ``retry_after_s``
    when to try again."""

    status = 503
    code = "unavailable"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = max(1, int(retry_after_s))


class ReadersBusy(PaperReadRefused):
    status = 503
    code = "readers_busy"


class PaperChecksRateExceeded(PaperReadRefused):
    status = 429
    code = "throttled"


@contextlib.contextmanager
def reader_slot_hold(
    *, wait_s: float = 0.0, pool: ReaderPool = PAPERS
) -> Iterator[Callable[[], None]]:
    """Hold one slot of ``pool`` for the ``with`` block, and yield the heartbeat that renews
    its lease (call it often; it writes at most every third of the lease). ReadersBusy when
    none is free within ``wait_s`` (0: refuse at once)."""
    count = int(getattr(settings, pool.setting))
    lease_s = int(settings.PAPER_READER_LEASE_S)
    token = secrets.token_hex(8)
    deadline = time.monotonic() + wait_s
    key = _take(pool, count, token, lease_s)
    while key is None and time.monotonic() < deadline:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        key = _take(pool, count, token, lease_s)
    if key is None:
        wait = pool.retry_after_s
        raise ReadersBusy(
            f"The site is reading {count} {pool.what}{'s' if count != 1 else ''} already, as "
            f"many as it reads at once; nothing was stored. Try again in {wait} seconds.",
            retry_after_s=wait,
        )
    renewed_at = time.monotonic()

    def heartbeat() -> None:
        nonlocal renewed_at
        if time.monotonic() - renewed_at >= lease_s / 3:
            cache.touch(key, lease_s)
            renewed_at = time.monotonic()

    try:
        yield heartbeat
    finally:
        # Only our own lease: one that ran out may have been taken by another reader since.
        if cache.get(key) == token:
            cache.delete(key)


def upload_read_hold(*, size: int) -> AbstractContextManager[object]:
    """A slot of the :data:`UPLOADS` pool for parsing a results file or body of ``size``
    bytes, already received (ReadersBusy when none is free); nothing under
    ``UPLOAD_READ_SLOT_MIN_KB``, which parses in the time a page takes."""
    if size < int(settings.UPLOAD_READ_SLOT_MIN_KB) * 1024:
        return contextlib.nullcontext()
    return reader_slot_hold(pool=UPLOADS)


def _take(pool: ReaderPool, count: int, token: str, lease_s: int) -> str | None:
    # In a random order, so that takers at once do not all contend for the first free key.
    for index in random.sample(range(count), count):
        key = pool.key.format(index)
        if cache.add(key, token, lease_s):
            return key
    return None


def reader_slots_held(pool: ReaderPool = PAPERS) -> int:
    """How many slots of ``pool`` are held now (for tests and the operators' view)."""
    count = int(getattr(settings, pool.setting))
    return len(cache.get_many([pool.key.format(index) for index in range(count)]))


__all__ = [
    "PAPERS",
    "UPLOADS",
    "PaperChecksRateExceeded",
    "PaperReadRefused",
    "ReaderPool",
    "ReadersBusy",
    "reader_slot_hold",
    "reader_slots_held",
    "upload_read_hold",
]
