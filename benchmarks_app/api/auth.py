"""``POST /api/auth/token/``: a token for a username and password, under the login lockout."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser

from benchmarks_app.api.parsers import JSONParser
from benchmarks_app.api.throttling import AnonThrottle


class TokenView(ObtainAuthToken):
    """Exchange a username and password for an API token.

    Wrong passwords count towards the same lockout as the login form (django-axes): after
    ``AXES_FAILURE_LIMIT`` failures for one username from one address the endpoint answers
    429 for ``AXES_COOLOFF_MINUTES``. Attempts count against the address's anonymous rate
    (``API_THROTTLE_ANON``), together with the login form's.
    """

    # DRF's view names its parsers itself; the JSON one must be ours (no Python in errors).
    parser_classes = (FormParser, MultiPartParser, JSONParser)
    # DRF's view has no throttles at all: a password check costs ~0.4 s of CPU. It counts
    # with the login form (benchmarks_app.views.accounts.LoginView) under the anonymous rate.
    throttle_classes = (AnonThrottle,)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        # The serializer passes this to ``authenticate``; django-axes needs the Django request
        # (its middleware reads the lockout flag set on it).
        context["request"] = self.request._request
        return context


token_view = TokenView.as_view()
