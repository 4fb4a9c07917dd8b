"""The webhook signature scheme: HMAC-SHA256 of "timestamp.body", checked in constant time."""

from __future__ import annotations

import hashlib
import hmac

from scoring.webhooks import sign, verify_signature

SECRET = "s3cret-key"
BODY = b'{"event":"run.finished","run":{"id":7}}'
NOW = 1_800_000_000


def test_sign_is_hmac_sha256_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, NOW, BODY) == "sha256=" + expected
    # str and bytes inputs sign the same message.
    assert sign(SECRET, str(NOW), BODY.decode()) == sign(SECRET.encode(), NOW, BODY)


def test_verify_accepts_the_right_signature_within_tolerance() -> None:
    signature = sign(SECRET, NOW, BODY)
    assert verify_signature(SECRET, str(NOW), BODY, signature, now=NOW + 299)
    assert verify_signature(SECRET, NOW, BODY, signature, now=NOW - 299)


def test_verify_refuses_tampering_wrong_secret_and_bad_headers() -> None:
    signature = sign(SECRET, NOW, BODY)
    assert not verify_signature(SECRET, NOW, BODY + b" ", signature, now=NOW)
    assert not verify_signature("other", NOW, BODY, signature, now=NOW)
    # The timestamp is signed: changing it breaks the signature.
    assert not verify_signature(SECRET, NOW + 1, BODY, signature, now=NOW)
    assert not verify_signature(SECRET, NOW, BODY, signature.removeprefix("sha256="), now=NOW)
    assert not verify_signature(SECRET, NOW, BODY, "sha256=" + "0" * 64, now=NOW)
    assert not verify_signature(SECRET, "yesterday", BODY, signature, now=NOW)
    assert not verify_signature(SECRET, NOW, BODY, "sha256=é", now=NOW)


def test_verify_refuses_an_old_delivery_unless_tolerance_is_off() -> None:
    signature = sign(SECRET, NOW, BODY)
    assert not verify_signature(SECRET, NOW, BODY, signature, now=NOW + 301)
    assert not verify_signature(SECRET, NOW, BODY, signature, tolerance_s=10, now=NOW + 11)
    assert verify_signature(SECRET, NOW, BODY, signature, tolerance_s=None, now=NOW + 10**6)
