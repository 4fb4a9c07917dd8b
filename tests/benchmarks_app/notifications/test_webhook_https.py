"""HTTPS to the pinned address: the certificate and SNI are still checked against the name.

A real TLS receiver on 127.0.0.1 with a self-signed certificate made by the ``openssl`` CLI
(trusted by the client here), reached through a name that resolves to it.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchmarks_app.services import webhook_http

NAME = "hooks.example.test"


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_receiver(tmp_path: Path) -> Iterator[dict[str, Any]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = _certificate(tmp_path, NAME)
    seen: dict[str, Any] = {"sni": [], "hosts": [], "cafile": cert}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen["hosts"].append(self.headers.get("Host"))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: seen["sni"].append(name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    seen["port"] = server.server_address[1]
    yield seen
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _trusting(cafile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda: real(cafile=str(cafile)))


def _pinned(port: int) -> list[Any]:
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


def test_https_goes_to_the_pinned_address_with_the_names_certificate(
    tls_receiver: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _trusting(tls_receiver["cafile"], monkeypatch)
    port = tls_receiver["port"]
    answer = webhook_http.post(
        f"https://{NAME}:{port}/hook", _pinned(port), b"{}", {}, deadline_s=10, max_bytes=65536
    )
    assert (answer.status_code, answer.error) == (204, "")
    assert tls_receiver["sni"] == [NAME]
    assert tls_receiver["hosts"] == [f"{NAME}:{port}"]


def test_a_certificate_for_another_name_is_refused(
    tls_receiver: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _trusting(tls_receiver["cafile"], monkeypatch)
    port = tls_receiver["port"]
    # The same address under another name: the certificate does not match it.
    answer = webhook_http.post(
        f"https://other.example.test:{port}/hook",
        _pinned(port),
        b"{}",
        {},
        deadline_s=10,
        max_bytes=65536,
    )
    assert answer.status_code is None
    assert "CERTIFICATE_VERIFY_FAILED" in answer.error
    assert tls_receiver["hosts"] == []
