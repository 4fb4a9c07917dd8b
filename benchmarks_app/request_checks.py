"""A request whose path or query string holds characters no text column can store is refused
up front, with a 400 naming the parameter, before any view reads it.

PostgreSQL refuses a NUL character in any text value ("A string literal cannot contain NUL
(0x00) characters"): a NUL in a query parameter that a filter passes to the database, or in a
path segment a view looks up, was an HTML 500 on 18 endpoints, the API's included. Checked
once here rather than in every filter and form, so that a new endpoint is covered without
anyone remembering to. The API answers in its error shape (``detail``, ``code``, ``errors``
naming the field), the site with a page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

# NUL: no PostgreSQL text value may hold it; a lone surrogate cannot be encoded to UTF-8 to
# reach the database at all. Noncharacters (U+FFFE, U+FFFF) are stored as any other text, so
# a request that carries them is answered as usual (the API's schema admits them).


def _bad(text: str) -> bool:
    return any(ch == "\x00" or "\ud800" <= ch <= "\udfff" for ch in text)


def request_invalid_field(request: HttpRequest) -> str | None:
    """The first part of ``request`` holding a forbidden character: ``"path"`` or the name of
    a query parameter (``None``: the request is clean)."""
    if _bad(request.path):
        return "path"
    for key, values in request.GET.lists():
        if _bad(key) or any(_bad(value) for value in values):
            # The name as sent, without the offending characters (it is echoed back).
            return "".join(ch for ch in key if not _bad(ch)) or "query"
    return None


class InvalidCharactersMiddleware:
    """Answer 400 to a request whose path or query parameters hold a NUL (or another character
    no text column can store): see the module's docstring."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = request_invalid_field(request)
        if field is None:
            return self.get_response(request)
        reason = "contains a NUL or another character that is not allowed"
        if request.path.startswith("/api/"):
            return JsonResponse(
                {
                    "detail": f"{field}: {reason}",
                    "code": "invalid",
                    "errors": [{"field": field, "reason": reason, "code": "invalid"}],
                },
                status=400,
            )
        return render(request, "400.html", {"field": field, "reason": reason}, status=400)
