"""The answer to a locked-out login (django-axes' ``AXES_LOCKOUT_CALLABLE``).

The login form and the admin login get a page that says what happened and when to retry;
the API (``POST /api/auth/token/``) gets the API's JSON error shape. Both answer 429.
"""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

LOCKED_OUT_CODE = "locked_out"


def lockout_message(request: HttpRequest) -> tuple[str, int]:
    """The sentence shown to the client, and the seconds until it may try again."""
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 0
    minutes = max(1, math.ceil(seconds / 60))
    return (
        "Too many failed login attempts for this username from your address; "
        f"try again in {minutes} minute{'s' if minutes != 1 else ''}.",
        seconds,
    )


def lockout_response(
    request: HttpRequest, response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    message, seconds = lockout_message(request)
    answer: HttpResponse
    if request.path.startswith("/api/"):
        answer = JsonResponse(
            {
                "detail": message,
                "code": LOCKED_OUT_CODE,
                "errors": [{"field": None, "reason": message, "code": LOCKED_OUT_CODE}],
            },
            status=429,
        )
    else:
        answer = HttpResponse(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<title>Login locked</title></head><body><main>"
            f"<h1>Login locked</h1><p>{escape(message)}</p>"
            "<p>If you forgot your password, ask the site's maintainers to reset it.</p>"
            "</main></body></html>",
            status=429,
        )
    if seconds:
        answer["Retry-After"] = str(seconds)
    return answer
