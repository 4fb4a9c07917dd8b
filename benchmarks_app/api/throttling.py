"""Rate limits for anonymous and authenticated clients.

Clients are told apart by :func:`benchmarks_app.client_address.client_address` (the rule
the login lockout uses too), not by DRF's own ``get_ident``: unless ``NUM_PROXIES`` is set,
DRF keys a client by the whole ``X-Forwarded-For`` header it sends, so a client rotating the
header escaped the anonymous limit.

DRF's throttles copy ``DEFAULT_THROTTLE_RATES`` once, when the module is imported, so
``override_settings`` (and tests that lower the rates) would not reach them. These read the
rate on every request instead.

DRF's own throttles keep a list of request times per client, read and written back whole: two
processes serving one client at once lose each other's requests (under three workers, 255
anonymous requests saw no 429). These count with :mod:`benchmarks_app.rate_limits` instead
(the shared cache's atomic increment, a sliding window).
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from benchmarks_app.client_address import client_address
from benchmarks_app.rate_limits import rate_take


def _live_rate(scope: str | None) -> str | None:
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope or "")
    return None if rate is None else str(rate)


class SharedWindowThrottle(SimpleRateThrottle):
    """A rate that holds across processes (:func:`benchmarks_app.rate_limits.rate_take`)."""

    _wait_s: float | None = None
    # Set by SimpleRateThrottle.__init__ from the rate; DRF's stubs do not declare them.
    num_requests: int
    duration: int

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self._wait_s = rate_take(
            key=self.key, limit=int(self.num_requests), duration_s=int(self.duration)
        )
        return self._wait_s is None

    def wait(self) -> float | None:
        return self._wait_s


class AnonThrottle(SharedWindowThrottle, AnonRateThrottle):
    """Anonymous clients, keyed by IP address."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)

    def get_ident(self, request: Request) -> str:
        return client_address(request)


class UserThrottle(SharedWindowThrottle, UserRateThrottle):
    """Authenticated clients, keyed by user (anonymous requests fall back to the IP)."""

    def get_rate(self) -> str | None:
        return _live_rate(self.scope)

    def get_ident(self, request: Request) -> str:
        return client_address(request)
