"""Rate limits for anonymous and authenticated clients.

DRF's throttles copy ``DEFAULT_THROTTLE_RATES`` once, when the module is imported, so
``override_settings`` (and tests that lower the rates) would not reach them. These read the
rate on every request instead.
"""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


def _live_rate(scope: str | None) -> str | None:
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope or "")
    return None if rate is None else str(rate)


class AnonThrottle(AnonRateThrottle):
    """Anonymous clients, keyed by IP address."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)


class UserThrottle(UserRateThrottle):
    """Authenticated clients, keyed by user (anonymous requests fall back to the IP)."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)
