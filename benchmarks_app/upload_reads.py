"""Views that parse a participant's results file hold one of the site's upload reader slots
while they do (:func:`benchmarks_app.services.reader_slots.upload_read_hold`), and a refused
file costs its sender part of an hourly allowance.

One decorator for the web forms and the API alike: it lets the request's body arrive first
(a multipart form's files are received into memory or temporary files, any other body read
whole, as the JSON parser would), so that a slow client costs its own thread, never a slot;
then it holds a slot for the view, where the file or body is decoded, checked and stored.
Past the cap the view is not run: ReadersBusy, which the API answers 503 with Retry-After in
its JSON shape and the web pages with their short "The site is busy" page.

A submission refused for what it sent (400 or 413: not CSV or JSON, a row or a field over a
limit, the body too large) was parsed for nothing, so it counts against the user's
``UPLOAD_REFUSALS_PER_HOUR`` and ``UPLOAD_REFUSALS_PER_10_MIN`` (the hour's are not for one
burst), kept in the shared cache (:mod:`benchmarks_app.rate_limits`) so that every web process
counts the same refusals. Once either is spent, the user's next submission is answered 429
with Retry-After once received, before it is parsed, even a good file, so one account cannot
keep the site parsing bad files in a loop (issue 35). Accepted submissions, quota refusals
(429) and refusals for load (503) cost nothing. Papers have their own allowances
(``CHECKLIST_PAPER_CHECKS_PER_HOUR`` and ``_PER_10_MIN``), counted where they are read.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from rest_framework.views import APIView

from benchmarks_app.rate_limits import Allowance, allowances_count, allowances_spent
from benchmarks_app.services.reader_slots import PaperReadRefused, upload_read_hold

View = TypeVar("View", bound=Callable[..., Any])

# The answers that refuse what the participant sent: invalid (400) or too large (413).
REFUSED_FOR_CONTENT = frozenset({400, 413})
REFUSALS_WINDOW_S = 3600

# A body refused before it was read is read to its end and thrown away, up to these bounds, so
# that its sender reads the 429 instead of a reset (gunicorn closes a connection whose unread
# body passes 64 KiB). A larger body is left unread and its connection reset: under the rush,
# draining hostile files of up to 64 MiB raised everybody's p50 about fivefold (gunicorn reads
# a body in Python; the sender kept sending), while a reset stops the sender at once. A body
# past the time bound (a slow sender holds a thread) is left too.
DRAIN_MAX_BYTES = 1024 * 1024
DRAIN_MAX_S = 2.0
_DRAIN_CHUNK = 256 * 1024


class UploadRefusalsExceeded(PaperReadRefused):
    """The user's submissions refused for their content have spent the hour's allowance:
    429 with Retry-After (the API's error shape, or the web pages' short page)."""

    status = 429
    code = "throttled"


def upload_received_size(request: Any) -> int:
    """Bytes of the request's uploaded files (a multipart form) or of its body, received in
    full; 0 for a request without a body. ``request`` is Django's or DRF's."""
    raw: HttpRequest = getattr(request, "_request", request)
    if raw.method not in ("POST", "PUT", "PATCH"):
        return 0
    if (raw.content_type or "").startswith("multipart/"):
        # DRF's or Django's own parser: it stores the files without reading what is in them.
        files = request.FILES
        return sum(upload.size or 0 for _, uploads in files.lists() for upload in uploads)
    return len(raw.body)


def request_body_drain(
    request: Any, *, max_bytes: int = DRAIN_MAX_BYTES, max_s: float = DRAIN_MAX_S
) -> bool:
    """Read and discard the rest of ``request``'s body (Django's or DRF's request), within
    ``max_bytes`` and ``max_s``; True when the body is now read to its end (or had none, or
    was read already)."""
    raw: HttpRequest = getattr(request, "_request", request)
    if hasattr(raw, "_body") or getattr(raw, "_read_started", False):
        return True
    try:
        length = int(raw.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    if length <= 0:
        return True
    if length > max_bytes:
        return False
    deadline = time.monotonic() + max_s
    left = length
    while left > 0:
        if time.monotonic() > deadline:
            return False
        chunk = raw.read(min(_DRAIN_CHUNK, left))
        if not chunk:  # the client stopped sending before its stated length
            return False
        left -= len(chunk)
    return True


def _refusals_key(request: Any) -> str | None:
    """The user's refusal count key, for a submission (POST) by a signed-in user only."""
    user = getattr(request, "user", None)
    if user is None or request.method != "POST" or not user.is_authenticated:
        return None
    return f"upload-refusals:user:{user.pk}"


def upload_refusal_allowances() -> list[Allowance]:
    """``UPLOAD_REFUSALS_PER_HOUR`` and ``UPLOAD_REFUSALS_PER_10_MIN``."""
    return [
        Allowance(int(settings.UPLOAD_REFUSALS_PER_HOUR), REFUSALS_WINDOW_S, "this hour"),
        Allowance(int(settings.UPLOAD_REFUSALS_PER_10_MIN), 600, "in the last 10 minutes"),
    ]


def upload_refusals_allowance_check(*, key: str) -> None:
    """UploadRefusalsExceeded, counting nothing, when the refusals under ``key`` have spent
    ``UPLOAD_REFUSALS_PER_HOUR`` or ``UPLOAD_REFUSALS_PER_10_MIN``."""
    spent = allowances_spent(key=key, allowances=upload_refusal_allowances())
    if spent is not None:
        allowance, wait = spent
        raise UploadRefusalsExceeded(
            f"You have had {allowance.limit} submissions refused {allowance.wording} because "
            f"their file or body could not be accepted (not valid CSV or JSON, fields missing, "
            f"a limit exceeded); this one was not parsed. Fix the file, then try again in "
            f"{max(1, int(wait))} seconds.",
            retry_after_s=wait,
        )


def _refusal_count(key: str) -> None:
    allowances_count(key=key, allowances=upload_refusal_allowances())


def _answered_status(view_self: Any, exc: Exception) -> tuple[Any, int | None]:
    """What an exception raised by the view answers: an APIView's own answer to it (DRF's
    exception handler, as its dispatch would call it: the Response and its status), else
    (None, 400) for what Django answers 400 (a body over its limits), else (None, None)."""
    if isinstance(view_self, APIView) and not isinstance(exc, PaperReadRefused):
        answer = view_self.handle_exception(exc)  # re-raises what DRF does not answer
        return answer, answer.status_code
    if isinstance(exc, SuspiciousOperation):  # RequestDataTooBig, TooManyFilesSent, ...
        return None, 400
    return None, None


def reads_upload(view: View) -> View:
    """Runs ``view`` (a function view, or an APIView's method) once the request's body has
    arrived, holding an upload reader slot when the body is large; a submission refused for
    its content counts against the user's hourly allowance, and past it the view is not run
    (429)."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # A function view gets the request first, a method after ``self``.
        request = args[0] if isinstance(args[0], HttpRequest) else args[1]
        view_self = None if isinstance(args[0], HttpRequest) else args[0]
        key = _refusals_key(request)
        # The body is received before any refusal: a client answered while still sending a
        # large file would find its connection reset instead of reading the answer. An
        # account whose refusals are spent has it read raw and thrown away, not parsed: its
        # loop of bad files then costs the site next to nothing (issue 35).
        if key is not None:
            try:
                upload_refusals_allowance_check(key=key)
            except UploadRefusalsExceeded:
                request_body_drain(request)
                raise
        size = upload_received_size(request)
        try:
            with upload_read_hold(size=size):
                answer = view(*args, **kwargs)
        except Exception as exc:
            if key is None:
                raise
            answer, status = _answered_status(view_self, exc)
            if status in REFUSED_FOR_CONTENT:
                _refusal_count(key)
            if answer is None:
                raise
            return answer
        if key is not None and answer.status_code in REFUSED_FOR_CONTENT:
            _refusal_count(key)
        return answer

    # The API schema documents its 503 (benchmarks_app.api.schema).
    wrapped.reads_participant_files = True  # type: ignore[attr-defined]
    return cast(View, wrapped)


__all__ = [
    "UploadRefusalsExceeded",
    "reads_upload",
    "request_body_drain",
    "upload_received_size",
    "upload_refusals_allowance_check",
]
