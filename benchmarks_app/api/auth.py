"""``POST /api/auth/token/``: a token for a username and password, under the login lockout."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser

from benchmarks_app.api.parsers import JSONParser


class TokenView(ObtainAuthToken):
    """Exchange a username and password for an API token.

    Wrong passwords count towards the same lockout as the login form (django-axes): after
    ``AXES_FAILURE_LIMIT`` failures for one username from one address the endpoint answers
    429 for ``AXES_COOLOFF_MINUTES``.
    """

    # DRF's view names its parsers itself; the JSON one must be ours (no Python in errors).
    parser_classes = (FormParser, MultiPartParser, JSONParser)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        # The serializer passes this to ``authenticate``; django-axes needs the Django request
        # (its middleware reads the lockout flag set on it).
        context["request"] = self.request._request
        return context


token_view = TokenView.as_view()
