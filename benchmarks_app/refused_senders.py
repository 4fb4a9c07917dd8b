"""An API client refused for its rate is refused again at the top of the stack until its wait
is over, without sessions, authentication, the view or the database.

An account that sends hostile files back to back, not waiting for Retry-After, is answered
429 by the API throttles and by its spent refusal allowances (``UPLOAD_REFUSALS_PER_HOUR``,
``UPLOAD_REFUSALS_PER_10_MIN``).
Each of those answers still went through every middleware, DRF's dispatch, a token look-up
in the database and the throttle's own cache round trips: in the deadline rush, three such
accounts sent 87 requests a second, every one refused, and raised the other visitors' p95
about 3x once the crowd's submissions were in (issue 35).

So when the API answers a token-authenticated write 429 for a rate (a throttle, the refusal
allowance, the paper checks' hourly rate), :func:`sender_refusal_mark` keeps in the shared
cache, for the wait it announced, that this token's writes to this path are refused; and
:class:`RefusedSenderMiddleware` answers the next such request 429 with the time left, in
the API's error shape, after one cache read. The answer is the one the view would have given:
a rate refuses every request of its user (or of that path) until the wait is over. Quota
refusals are not marked (a quota depends on what is submitted to, not on the path), nor is
anything answered early to a request without a token (sessions and anonymous clients go the
usual way). The mark is in the shared cache, so it holds across web workers and machines.

A cheaper refusal alone does not slow a client that never waits: measured in the rush, the
three hostile accounts then sent 126 requests a second instead of 87, and the other visitors'
p95 did not improve. So an early refusal is also answered late, by ``REFUSED_SENDER_DELAY_S``
(capped at the wait left), one such request per web process at a time: a sleeping thread
costs no CPU, a client in a loop then sends about one request a second per connection, and
the cap keeps a client with many connections from holding more than one thread per process
(its other requests are answered at once).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse

from benchmarks_app.upload_reads import request_body_drain

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_KEY = "refused-sender:{}"
# The one thread of this process that may answer a refused sender late (see the module).
_LATE_ANSWER = threading.BoundedSemaphore(1)


def _sender_key(request: HttpRequest) -> str | None:
    """The cache key of this token's writes to this path; None for a request that is not a
    token-authenticated API write."""
    if request.method not in WRITE_METHODS or not request.path.startswith("/api/"):
        return None
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header.startswith("Token "):
        return None
    digest = hashlib.sha256(f"{header}|{request.path}".encode()).hexdigest()
    return _KEY.format(digest)


def sender_refusal_mark(request: Any, *, wait_s: float) -> None:
    """Refuse this token's writes to this path early for ``wait_s`` seconds (``request``:
    Django's or DRF's); nothing for a request that is not a token-authenticated API write."""
    raw: HttpRequest = getattr(request, "_request", request)
    key = _sender_key(raw)
    if key is None or wait_s <= 0:
        return
    seconds = max(1, math.ceil(wait_s))
    cache.set(key, time.time() + seconds, seconds)


def _throttled(wait_s: int) -> JsonResponse:
    # DRF's own message for a Throttled with a wait, in the API's error shape.
    detail = f"Request was throttled. Expected available in {wait_s} second{'s' * (wait_s != 1)}."
    response = JsonResponse(
        {
            "detail": detail,
            "code": "throttled",
            "errors": [{"field": None, "reason": detail, "code": "throttled"}],
            "retry_after_s": wait_s,
        },
        status=429,
    )
    response["Retry-After"] = str(wait_s)
    return response


class RefusedSenderMiddleware:
    """Answer 429 at once to a token's write while its rate refusal lasts (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        key = _sender_key(request)
        if key is not None:
            until = cache.get(key)
            left = math.ceil(until - time.time()) if isinstance(until, float) else 0
            if left > 0:
                # Read and thrown away within bounds, so the sender reads the answer.
                request_body_drain(request)
                delay = min(float(settings.REFUSED_SENDER_DELAY_S), float(left))
                if delay > 0 and _LATE_ANSWER.acquire(blocking=False):
                    try:
                        time.sleep(delay)
                    finally:
                        _LATE_ANSWER.release()
                    left = max(1, math.ceil(until - time.time()))
                return _throttled(left)
        return self.get_response(request)


__all__ = ["RefusedSenderMiddleware", "sender_refusal_mark"]
