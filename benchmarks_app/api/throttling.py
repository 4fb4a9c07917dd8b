"""Rate limits for anonymous and authenticated clients.

Clients are told apart by :func:`benchmarks_app.client_address.client_address` (the rule
the login lockout uses too), not by DRF's own ``get_ident``: unless ``NUM_PROXIES`` is set,
DRF keys a client by the whole ``X-Forwarded-For`` header it sends, so a client rotating the
header escaped the anonymous limit.

DRF's throttles copy ``DEFAULT_THROTTLE_RATES`` once, when the module is imported, so
``override_settings`` (and tests that lower the rates) would not reach them. These read the
rate on every request instead.
"""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from benchmarks_app.client_address import client_address


def _live_rate(scope: str | None) -> str | None:
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope or "")
    return None if rate is None else str(rate)


class AnonThrottle(AnonRateThrottle):
    """Anonymous clients, keyed by IP address."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)

    def get_ident(self, request: Request) -> str:
        return client_address(request)


class UserThrottle(UserRateThrottle):
    """Authenticated clients, keyed by user (anonymous requests fall back to the IP)."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)

    def get_ident(self, request: Request) -> str:
        return client_address(request)
