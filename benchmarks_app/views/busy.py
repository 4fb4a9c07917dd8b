"""Answers to requests refused for load rather than for what they sent: 429 or 503, with a
page that says why and a Retry-After header.

:class:`PaperReadRefusedMiddleware` gives every web page that reads a paper the answer for
:class:`~benchmarks_app.services.reader_slots.PaperReadRefused` (all reader slots taken, or
the user's reads that store nothing spent); the API answers it in its own JSON shape
(``benchmarks_app.api.exceptions``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.html import escape

from benchmarks_app.services.reader_slots import PaperReadRefused


def throttled_page(message: str, *, retry_after_s: float, status: int = 429) -> HttpResponse:
    """A short page saying why the request was refused and when to retry (Retry-After)."""
    title = "Too many requests" if status == 429 else "The site is busy"
    answer = HttpResponse(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title></head><body><main>"
        f"<h1>{title}</h1><p>{escape(message)}</p></main></body></html>",
        status=status,
    )
    answer["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
    return answer


class PaperReadRefusedMiddleware:
    """Turns a paper read refused for load into its 429/503 page instead of a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, PaperReadRefused):
            return throttled_page(exc.message, retry_after_s=exc.retry_after_s, status=exc.status)
        return None
