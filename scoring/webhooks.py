"""Signing and checking webhook deliveries (pure Python: receivers can copy this module).

Every delivery is a JSON ``POST`` with these headers:

* ``X-Eval-Event``: the event, e.g. ``run.finished``;
* ``X-Eval-Delivery``: the delivery's id (the same on every retry of one delivery);
* ``X-Eval-Timestamp``: when this attempt was signed, in whole seconds since the Unix epoch;
* ``X-Eval-Signature``: ``sha256=`` followed by the hex HMAC-SHA256, keyed with the webhook's
  secret, of ``f"{timestamp}.{body}"`` (the timestamp, a dot, then the raw body bytes).

A receiver recomputes the signature over the body bytes it received, exactly as received, and
compares in constant time; it should also refuse timestamps far from its clock (a replayed
old delivery), and use ``X-Eval-Delivery`` to ignore a delivery it has already processed.
"""

from __future__ import annotations

import hashlib
import hmac
import time

EVENT_HEADER = "X-Eval-Event"
DELIVERY_HEADER = "X-Eval-Delivery"
TIMESTAMP_HEADER = "X-Eval-Timestamp"
SIGNATURE_HEADER = "X-Eval-Signature"
SIGNATURE_PREFIX = "sha256="
# How far a delivery's timestamp may be from the receiver's clock by default (seconds).
DEFAULT_TOLERANCE_S = 300


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def sign(secret: str | bytes, timestamp: str | int, body: str | bytes) -> str:
    """The ``X-Eval-Signature`` value of ``body`` sent at ``timestamp``."""
    message = _bytes(str(timestamp)) + b"." + _bytes(body)
    digest = hmac.new(_bytes(secret), message, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def verify_signature(
    secret: str | bytes,
    timestamp: str | int,
    body: str | bytes,
    signature: str,
    *,
    tolerance_s: float | None = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """Whether ``signature`` signs ``body`` at ``timestamp`` with ``secret``.

    Constant-time comparison. With ``tolerance_s`` (the default: 5 minutes) a timestamp further
    than that from ``now`` (the current time when not given) is refused too, so that a captured
    delivery cannot be replayed later; ``tolerance_s=None`` checks the signature only.
    """
    if not isinstance(signature, str) or not signature.startswith(SIGNATURE_PREFIX):
        return False
    try:
        sent_at = int(str(timestamp))
    except ValueError:
        return False
    if tolerance_s is not None:
        current = time.time() if now is None else now
        if abs(current - sent_at) > tolerance_s:
            return False
    expected = sign(secret, str(timestamp), body)
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace"))
