"""One error shape for the whole API: what went wrong, on which field, and why.

Every error response is a JSON object::

    {
      "detail": "genuine: This field is required.",
      "code": "invalid",
      "errors": [{"field": "genuine", "reason": "This field is required.", "code": "required"}]
    }

``field`` is the request field (dotted for nested input, e.g. ``findings.3.severity``) or
``null`` for errors that concern the request as a whole (authentication, permissions,
throttling, not found). ``detail`` is a one-line summary that a client can show as is.
"""

from __future__ import annotations

from traceback import walk_tb
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from benchmarks_app.refused_senders import sender_refusal_mark
from benchmarks_app.services.reader_slots import PaperReadRefused
from benchmarks_app.upload_reads import request_body_drain


def _flatten(detail: Any, field: str | None) -> list[dict[str, Any]]:
    """Walk DRF's nested error structure into a flat list of field/reason pairs."""
    if isinstance(detail, dict):
        errors: list[dict[str, Any]] = []
        for key, value in detail.items():
            name = str(key)
            if name == api_settings.NON_FIELD_ERRORS_KEY:
                child = field
            else:
                child = f"{field}.{name}" if field else name
            errors.extend(_flatten(value, child))
        return errors
    if isinstance(detail, list):
        errors = []
        for index, value in enumerate(detail):
            # A list of plain messages belongs to the field itself; a list of dicts is a
            # nested list serializer, whose items are addressed by their position.
            child = f"{field}.{index}" if field and isinstance(value, dict | list) else field
            errors.extend(_flatten(value, child))
        return errors
    code = getattr(detail, "code", None) or "invalid"
    return [{"field": field, "reason": str(detail), "code": code}]


def _summary(errors: list[dict[str, Any]]) -> str:
    parts = [f"{e['field']}: {e['reason']}" if e["field"] else e["reason"] for e in errors]
    return "; ".join(parts) or "Invalid request."


def error_payload(exc: exceptions.APIException) -> dict[str, Any]:
    errors = _flatten(exc.detail, None)
    code = exc.get_codes() if not isinstance(exc.detail, dict | list) else exc.default_code
    return {"detail": _summary(errors), "code": str(code), "errors": errors}


class RequestTooLarge(exceptions.APIException):
    """413: the request body is over ``UPLOAD_MAX_MB``."""

    status_code = 413
    default_code = "too_large"


def too_large_error() -> RequestTooLarge:
    limit = getattr(settings, "UPLOAD_MAX_MB", 20)
    return RequestTooLarge(
        {"body": [exceptions.ErrorDetail(f"the request is over {limit} MB", code="too_large")]}
    )


def _body_too_deep() -> exceptions.ParseError:
    # json raises RecursionError (not ValueError) for arrays or objects nested too deeply.
    detail = "not valid JSON (nested too deeply)"
    return exceptions.ParseError({"body": [exceptions.ErrorDetail(detail, code="parse_error")]})


def _raised_by_json(exc: BaseException) -> bool:
    """Whether the error came from decoding JSON (the request body), not from the view."""
    modules = {frame.f_globals.get("__name__", "") for frame, _ in walk_tb(exc.__traceback__)}
    return any(m == "rest_framework.parsers" or m.startswith("json") for m in modules)


class QuotaThrottled(exceptions.Throttled):
    """429 for a submission quota (per benchmark and day): a Throttled with Retry-After, but
    not a rate, so the sender's next requests are not refused early (a quota depends on what
    is submitted to, and a maintainer may raise it)."""


class PaperReadRefusedError(exceptions.APIException):
    """A paper not read for load (all reader slots taken: 503; the user's previews: 429);
    DRF sends ``wait`` as Retry-After."""

    status_code = 503
    default_code = "unavailable"

    def __init__(self, message: str, *, status: int, code: str, wait: int) -> None:
        super().__init__(message, code=code)
        self.status_code = status
        self.wait = wait


def _paper_read_refused(exc: PaperReadRefused) -> PaperReadRefusedError:
    return PaperReadRefusedError(
        exc.message, status=exc.status, code=exc.code, wait=exc.retry_after_s
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler with a stable body shape; Django's own errors are translated first."""
    if isinstance(exc, DjangoValidationError):
        # Model-level validation (full_clean) raised inside a service: same shape as a
        # serializer error instead of a 500.
        detail: Any = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        exc = exceptions.ValidationError(detail=detail)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        exc = too_large_error()
    elif isinstance(exc, RecursionError) and _raised_by_json(exc):
        exc = _body_too_deep()
    elif isinstance(exc, PaperReadRefused):
        exc = _paper_read_refused(exc)

    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(exc, (exceptions.Throttled, PaperReadRefusedError)) and "request" in context:
        # Refused before its body was read (a throttle answers first): read it raw and
        # throw it away, so the sender reads this answer instead of a reset.
        request_body_drain(context["request"])
    body = error_payload(exc)
    wait = getattr(exc, "wait", None)
    if isinstance(exc, (exceptions.Throttled, PaperReadRefusedError)) and wait is not None:
        body["retry_after_s"] = int(wait)
        if (
            response.status_code == 429
            and not isinstance(exc, QuotaThrottled)
            and "request" in context
        ):
            # A rate refuses every request of its sender until the wait is over: the next
            # ones are answered before the view (benchmarks_app.refused_senders).
            sender_refusal_mark(context["request"], wait_s=float(wait))
    response.data = body
    return response
