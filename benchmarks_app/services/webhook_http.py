"""The HTTP side of a webhook delivery: which addresses may be reached, and one bounded POST.

Kept apart from the delivery bookkeeping (:mod:`benchmarks_app.services.webhooks`) and free of
Django, because every line here is about what an untrusted receiver can do to a worker:

* **Addresses.** A host is resolved once; every address it resolves to is checked (with the
  IPv4 address embedded in IPv4-mapped, NAT64 and 6to4 addresses judged in its place), and the
  connection goes to one of exactly those addresses. The Host header, TLS SNI and certificate
  check keep the host name. A name that resolves to a public address when checked and to a
  private one a moment later (DNS rebinding) therefore never reaches the private one.
* **Time.** ``deadline_s`` bounds the whole attempt: connecting, TLS, sending, the status
  line, headers and answer. Each read waits at most what is left of it, and a watchdog shuts
  the socket down when it passes, so a receiver that trickles one byte at a time cannot hold
  the worker past it (a per-read timeout would be reset by every byte).
* **Size.** At most ``max_bytes`` of the answer are read, headers included.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# An address as ``socket.getaddrinfo`` gives it: (family, type, proto, canonname, sockaddr).
AddrInfo = tuple[Any, ...]

NAT64 = ipaddress.ip_network("64:ff9b::/96")
# The local-use NAT64 prefix (RFC 8215): translated by the site's own network, never public.
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


class ResolveError(OSError):
    """The host name does not resolve."""


class AnswerTooLarge(OSError):
    pass


class DeadlinePassed(TimeoutError):
    pass


# IANA's special-purpose registries, the blocks not "Globally Reachable" (and multicast):
# Python's ``is_global`` follows the registry of the interpreter's release, and 3.11 still
# calls all of 192.0.0.0/24 global, for one. Checked first, whatever ``ipaddress`` says.
NON_GLOBAL_NETWORKS = tuple(
    ipaddress.ip_network(block)
    for block in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "::ffff:0:0/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)
# 6to4 (2002::/16) is left to the check of the IPv4 address it carries (address_is_public).
# Inside those blocks, the few the registry marks globally reachable (anycast services).
GLOBAL_EXCEPTIONS = tuple(
    ipaddress.ip_network(block)
    for block in (
        "192.0.0.9/32",
        "192.0.0.10/32",
        "2001:1::1/128",
        "2001:1::2/128",
        "2001:3::/32",
        "2001:4:112::/48",
        "2001:20::/28",
        "2001:30::/28",
    )
)


def _iana_non_global(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if any(ip in block for block in GLOBAL_EXCEPTIONS):
        return False
    return any(ip in block for block in NON_GLOBAL_NETWORKS)


def _plainly_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if _iana_non_global(ip):
        return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        or (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local)
    )


def address_is_public(address: str) -> bool:
    """Whether a webhook may be sent to ``address`` (an IPv4 or IPv6 literal).

    An IPv6 address that carries an IPv4 address is judged by that one too: IPv4-mapped
    (``::ffff:a.b.c.d``) and NAT64 (``64:ff9b::a.b.c.d``) by the IPv4 address alone (that is
    where a translator sends it), 6to4 (``2002:AABB:CCDD::``) and Teredo by both. IPv4-compatible
    ``::a.b.c.d`` and the other ``::/8`` forms are reserved and refused.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _plainly_public(ip.ipv4_mapped)
        if ip in NAT64:
            return _plainly_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip in NAT64_LOCAL:
            return False
        embedded = [ip.sixtofour, *(ip.teredo or ())]
        if any(v4 is not None and not _plainly_public(v4) for v4 in embedded):
            return False
    return _plainly_public(ip)


def resolve(host: str, port: int) -> list[AddrInfo]:
    """Every TCP address of ``host``; ``ResolveError`` when it has none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ResolveError(f"the host {host!r} cannot be resolved") from exc
    if not infos:
        raise ResolveError(f"the host {host!r} cannot be resolved")
    return list(infos)


def first_private(infos: list[AddrInfo]) -> str | None:
    """The first of ``infos`` that is not public (None: all are)."""
    for info in infos:
        address = str(info[4][0])
        if not address_is_public(address):
            return address
    return None


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    error: str
    # The first bytes of the answer's body (at most ``keep``).
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class _Deadline:
    """One attempt's wall clock, and a watchdog that shuts its socket down when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.fired = False
        self._timer: threading.Timer | None = None
        self._guarded: socket.socket | None = None

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0 or self.fired:
            raise DeadlinePassed()
        return left

    @property
    def passed(self) -> bool:
        return self.fired or time.monotonic() >= self.at

    def guard(self, sock: socket.socket) -> None:
        self.close()  # one guarded connection per attempt
        # A duplicate of the descriptor: shutdown() acts on the connection, so it also ends a
        # read blocked on the TLS socket that later wraps (and detaches) ``sock``.
        self._guarded = sock.dup()
        self._timer = threading.Timer(max(self.at - time.monotonic(), 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        guarded = self._guarded  # close() may clear it meanwhile
        if guarded is not None:
            with contextlib.suppress(OSError):
                guarded.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._guarded is not None:
            self._guarded.close()
            self._guarded = None


class _BoundedReader(io.RawIOBase):
    """A socket's reads, each waiting at most what is left of the deadline, ``limit`` in all."""

    def __init__(self, sock: socket.socket, deadline: _Deadline, limit: int, ref: Any) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._left = limit
        # The socket's own file object, closed with this one: while it is open, closing the
        # connection (http.client does once a response says "close") leaves the socket open
        # for the response, as it does for http.client's own reader.
        self._ref = ref

    def close(self) -> None:
        self._ref.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            raise AnswerTooLarge()
        view = memoryview(buffer).cast("B")[: self._left]
        self._sock.settimeout(self._deadline.left())
        n = self._sock.recv_into(view)
        self._left -= n
        return n


def _connect(infos: list[AddrInfo], deadline: _Deadline) -> socket.socket:
    """A connection to the first of ``infos`` that answers (only those: nothing re-resolved)."""
    error: OSError = OSError("no address to connect to")
    for family, type_, proto, _, sockaddr in infos:
        sock = socket.socket(family, type_, proto)
        try:
            sock.settimeout(deadline.left())
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            error = exc
            if isinstance(exc, DeadlinePassed):
                raise
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error


def _connection(
    scheme: str, host: str, port: int, infos: list[AddrInfo], deadline: _Deadline, limit: int
) -> http.client.HTTPConnection:
    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        sock = _connect(infos, deadline)
        deadline.guard(sock)
        return sock

    class Response(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            self.fp = io.BufferedReader(_BoundedReader(sock, deadline, limit, self.fp))

    conn: http.client.HTTPConnection
    if scheme == "https":
        # Certificates are checked against the host name (SNI too), not the address.
        conn = http.client.HTTPSConnection(
            host, port, timeout=deadline.left(), context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=deadline.left())
    conn._create_connection = create_connection  # type: ignore[attr-defined]
    conn.response_class = Response
    return conn


def post(
    url: str,
    infos: list[AddrInfo],
    body: bytes,
    headers: dict[str, str],
    *,
    deadline_s: float,
    max_bytes: int,
    keep: int = 500,
) -> Answer:
    """POST ``body`` to ``url`` at one of the addresses ``infos`` (already checked).

    Never raises for what the receiver does: a refused connection, a passed deadline, an
    answer over ``max_bytes`` or a malformed one come back as an ``Answer`` without a status.
    Redirects are not followed (a 3xx is a failed attempt).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    deadline = _Deadline(deadline_s)
    conn: http.client.HTTPConnection | None = None
    try:
        conn = _connection(scheme, host, port, infos, deadline, max_bytes)
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        # Only what is kept is read: the rest of the body is never waited for. The status is
        # the receiver's answer even when those first bytes do not come in time.
        try:
            kept = response.read(keep)
        except (OSError, http.client.HTTPException):
            kept = b""
        return Answer(response.status, "", kept)
    except AnswerTooLarge:
        return Answer(None, f"the answer is larger than {max_bytes} bytes; cut there")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if deadline.passed:
            return Answer(
                None, f"no complete answer within the {deadline.seconds:g} s deadline; cut there"
            )
        reason = getattr(exc, "reason", None) or exc
        return Answer(None, f"{type(exc).__name__}: {reason}"[:keep])
    finally:
        if conn is not None:
            conn.close()
        deadline.close()
