"""What a hostile webhook receiver can do to a worker: bounded (issue 23, rows 7 and 9).

The receivers are real local sockets; the deadline is made short so that a test never waits
long, and the assertions are on what was recorded and on who hung up, never on timings.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import DeliveryStatus, WebhookDelivery
from benchmarks_app.services import webhook_http, webhooks
from benchmarks_app.services.run_events import run_ended
from tests.benchmarks_app.notifications.conftest import RawReceiver, Receiver
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _deliver(url: str, capture: Any) -> WebhookDelivery:
    user = UserFactory.create()
    webhook = webhooks.webhook_create(owner=user, url=url)
    with capture(execute=True):
        run_ended(run=ended_run(user=user))
    return WebhookDelivery.objects.get(webhook=webhook)


def _trickle(state: RawReceiver, conn: socket.socket) -> None:
    # A status line and a header that never end, one byte every half second, for 20 s at
    # most: a per-read timeout of 1 s is reset by every byte and would wait all of it.
    answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200
    for byte in answer[:40]:
        if not state.send(conn, bytes([byte])):
            return
        time.sleep(0.5)


@override_settings(WEBHOOK_TIMEOUT_S=1, WEBHOOK_MAX_ATTEMPTS=1)
def test_a_trickling_receiver_is_cut_at_the_deadline(
    raw_receiver: Any, django_capture_on_commit_callbacks: Any
) -> None:
    receiver = raw_receiver(_trickle)
    delivery = _deliver(receiver.url, django_capture_on_commit_callbacks)

    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempts == 1
    assert delivery.last_status_code is None
    assert delivery.last_error == "no complete answer within the 1 s deadline; cut there"
    # We hung up on it: its next byte found the connection gone (it would have gone on
    # trickling otherwise, and ended by itself without noticing anything).
    assert receiver.closed_by_peer.wait(timeout=15)
    assert receiver.sent < 40


def _huge_headers(state: RawReceiver, conn: socket.socket) -> None:
    # 99 headers of 60 kB: within http.client's own limits (100 headers, 64 kB a line), so
    # only a cap on the answer's size stops the worker from reading 6 MB.
    if not state.send(conn, b"HTTP/1.1 200 OK\r\n"):
        return
    for i in range(99):
        if not state.send(conn, f"X-Big-{i}: ".encode() + b"b" * 60_000 + b"\r\n"):
            return
    state.send(conn, b"Content-Length: 0\r\n\r\n")


@override_settings(WEBHOOK_MAX_ANSWER_BYTES=65536, WEBHOOK_MAX_ATTEMPTS=1)
def test_an_answer_with_huge_headers_is_cut_at_the_cap(
    raw_receiver: Any, django_capture_on_commit_callbacks: Any
) -> None:
    receiver = raw_receiver(_huge_headers)
    delivery = _deliver(receiver.url, django_capture_on_commit_callbacks)
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.last_status_code is None
    assert delivery.last_error == "the answer is larger than 65536 bytes; cut there"


def _huge_body(state: RawReceiver, conn: socket.socket) -> None:
    # A 1 GB error page, sent as fast as the client takes it.
    if not state.send(conn, b"HTTP/1.1 500 Oops\r\nContent-Length: 1073741824\r\n\r\n"):
        return
    chunk = b"<p>sorry</p>" * 87_382  # ~1 MB
    for _ in range(1024):
        if not state.send(conn, chunk):
            return


@override_settings(WEBHOOK_MAX_ANSWER_BYTES=65536, WEBHOOK_MAX_ATTEMPTS=1)
def test_a_huge_body_is_not_read_past_what_is_kept(
    raw_receiver: Any, django_capture_on_commit_callbacks: Any
) -> None:
    receiver = raw_receiver(_huge_body)
    delivery = _deliver(receiver.url, django_capture_on_commit_callbacks)
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.last_status_code == 500
    assert delivery.last_error.startswith("HTTP 500: <p>sorry</p><p>sorry</p>")
    assert len(delivery.last_error) <= webhooks.ANSWER_KEEP
    # The client hung up long before the gigabyte (what socket buffers hold is all it sent).
    assert receiver.closed_by_peer.wait(timeout=15)
    assert receiver.sent < 200 * 1024 * 1024


# --- Addresses ---------------------------------------------------------------------------

# Each reaches 127.0.0.1 (or the site's own network) through an IPv6 form.
DISGUISED_LOOPBACK = [
    "http://[::127.0.0.1]/hook",  # IPv4-compatible
    "http://[64:ff9b::127.0.0.1]/hook",  # NAT64
    "http://[64:ff9b:1::a00:1]/hook",  # local-use NAT64
    "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
    "http://[2001:0:7f00:1::1]/hook",  # Teredo, server 127.0.0.1
]


@override_settings(WEBHOOK_ALLOW_PRIVATE=False)
@pytest.mark.parametrize("url", DISGUISED_LOOPBACK)
def test_disguised_private_addresses_are_refused_at_registration(url: str) -> None:
    with pytest.raises(webhooks.WebhookError, match="private, loopback or reserved address"):
        webhooks.webhook_create(owner=UserFactory.create(), url=url)


@pytest.mark.parametrize("url", DISGUISED_LOOPBACK)
def test_disguised_private_addresses_are_refused_at_send_time(
    url: str, django_capture_on_commit_callbacks: Any
) -> None:
    # Registered while private addresses were allowed; production refuses to send.
    user = UserFactory.create()
    webhook = webhooks.webhook_create(owner=user, url=url)
    run = ended_run(user=user)
    with (
        override_settings(WEBHOOK_ALLOW_PRIVATE=False),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run_ended(run=run)
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.last_status_code is None
    assert delivery.last_error.startswith("refused: url resolves to ")
    assert "private, loopback or reserved address" in delivery.last_error


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("64:ff9b::93.184.216.34", True),  # NAT64 of a public address: where DNS64 sends it
        ("2002:5db8:d822::1", True),  # 6to4 of a public address
        ("::ffff:93.184.216.34", True),
        ("::ffff:10.0.0.1", False),
        ("64:ff9b::10.0.0.1", False),
        ("64:ff9b::169.254.169.254", False),
        ("2002:a9fe:a9fe::", False),  # 6to4 of the cloud metadata address
        ("::93.184.216.34", False),  # IPv4-compatible: deprecated, reserved
        ("100.64.0.1", False),  # carrier-grade NAT
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("224.0.0.1", False),
        ("0.0.0.0", False),
        ("::", False),
        # IANA non-global blocks that Python 3.11's is_global still calls global.
        ("192.0.0.192", False),
        ("192.0.0.8", False),
        ("::ffff:192.0.0.192", False),
        ("64:ff9b::192.0.0.192", False),
        ("3fff::1", False),  # documentation (RFC 9637)
        ("5f00::1", False),  # SRv6 SIDs
        ("192.0.0.9", True),  # the registry's globally reachable anycast exceptions
    ],
)
def test_address_is_public(address: str, public: bool) -> None:
    assert webhook_http.address_is_public(address) is public


@override_settings(WEBHOOK_TIMEOUT_S=1, WEBHOOK_ALLOW_PRIVATE=False)
def test_dns_rebinding_never_reaches_the_private_address(
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The name resolves to a public address when checked, then to the local receiver."""
    port = int(receiver.url.split(":")[2].split("/")[0])
    real_getaddrinfo = socket.getaddrinfo
    looked_up: list[str] = []

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.rebind.test":
            return real_getaddrinfo(host, *args, **kwargs)
        looked_up.append(host)
        # Public for the first two look-ups (registration, the check before sending), the
        # receiver on 127.0.0.1 for any after.
        address = "93.184.216.34" if len(looked_up) <= 2 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    connected_to: list[Any] = []
    real_connect = webhook_http._connect

    def connect(infos: Any, deadline: Any) -> socket.socket:
        connected_to.extend(info[4] for info in infos)
        return real_connect(infos, deadline)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(webhook_http, "_connect", connect)
    delivery = _deliver(
        f"http://hooks.rebind.test:{port}/hooks/eval", django_capture_on_commit_callbacks
    )

    assert receiver.received == []
    # One look-up at registration, one for the attempt, and the connection went to the very
    # address that attempt checked.
    assert len(looked_up) == 2
    assert connected_to == [("93.184.216.34", port)]
    assert delivery.last_status_code is None
    assert delivery.last_error
