"""Re-running a write that PostgreSQL rolled back to break a deadlock or a serialization
conflict.

PostgreSQL resolves a deadlock by aborting one of the transactions in it, and its manual's
advice is to retry that transaction. Under the deadline rush (100 users, 2 queue clusters,
PostgreSQL) a participant's audit upload refreshing the boards its scanner is on and a
worker's run end or paired marks writing the same boards' rows met in a deadlock a few times
in five minutes: the upload answered 500 and the paired marks task failed. A retried call
starts a new transaction, so it only ever runs outside an atomic block (inside one, the
outer transaction is already aborted: the error goes up to whoever owns it).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.db import OperationalError, connection

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# SQLSTATEs of a transaction PostgreSQL rolled back for another's sake.
DEADLOCK_DETECTED = "40P01"
SERIALIZATION_FAILURE = "40001"
CONFLICTS = {DEADLOCK_DETECTED, SERIALIZATION_FAILURE}
# Five: under the rush (20 participants uploading at once, two clusters ending runs) three
# attempts still let 9 of 189 audit uploads end in a deadlock each time.
ATTEMPTS = 5


def is_conflict(exc: BaseException) -> bool:
    """The error is PostgreSQL's deadlock or serialization failure (psycopg's ``sqlstate``)."""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) in CONFLICTS


def _rewind(values: Any) -> None:
    # An uploaded file was read by the failed attempt; the next one reads it from the start.
    for value in values:
        seek = getattr(value, "seek", None)
        if callable(seek):
            seek(0)


def retry_on_conflict(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` (a whole transaction: put this above ``@transaction.atomic``) again, up to
    :data:`ATTEMPTS` times in all, when PostgreSQL aborted it for a deadlock or a
    serialization conflict, after a short random, doubling pause."""

    @functools.wraps(fn)
    def attempt(*args: P.args, **kwargs: P.kwargs) -> R:
        for number in range(1, ATTEMPTS + 1):
            try:
                return fn(*args, **kwargs)
            except OperationalError as exc:
                if number == ATTEMPTS or connection.in_atomic_block or not is_conflict(exc):
                    raise
                log.warning(
                    "%s: %s; trying again (%d of %d)",
                    fn.__qualname__,
                    str(exc).splitlines()[0],
                    number + 1,
                    ATTEMPTS,
                )
                _rewind([*args, *kwargs.values()])
                # Jittered and doubling (at most 4 s in all), so the same writers do not meet
                # again at once.
                time.sleep(random.uniform(0.05, 0.25) * 2 ** (number - 1))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    return attempt
