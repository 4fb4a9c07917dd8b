"""The client's address: one rule for every limit keyed by it.

The API throttles (DRF), the login lockout (django-axes) and the password-reset and sign-up
mail limits all read the address through :func:`client_address`. ``NUM_PROXIES`` says how
many proxies in front of the site append to ``X-Forwarded-For``; 0 (the default) trusts the
header not at all, since any client can send one, and a client rotating it would otherwise
get a fresh allowance with every request.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """``REMOTE_ADDR``, or with ``NUM_PROXIES`` = n > 0 the address the n-th proxy from the
    site saw (the n-th entry from the right of ``X-Forwarded-For``), as DRF counts them."""
    remote = str(request.META.get("REMOTE_ADDR") or "")
    # Read on every request, so that override_settings reaches it.
    proxies = int(getattr(settings, "NUM_PROXIES", 0) or 0)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in str(forwarded).split(",") if hop.strip()]
    if not hops:
        return remote
    return hops[-min(proxies, len(hops))]
