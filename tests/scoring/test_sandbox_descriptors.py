"""The reader's child keeps none of its caller's descriptors (issue 35: connection resets in
the rush). A web worker forks it while it holds its clients' connections; a child that kept
them held each one open until it exited, whatever the worker did with it."""

from __future__ import annotations

import socket
import threading
import time

from scoring.sandbox import Limits, run_limited


def _in_thread(seconds: float, done: list[float]) -> threading.Thread:
    def read() -> None:
        run_limited(time.sleep, seconds, limits=Limits(cpu_seconds=30, stall_seconds=30))
        done.append(time.monotonic())

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def test_a_connection_the_caller_closes_while_a_child_reads_is_closed_for_its_client() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname()[:2])
        connection, _ = server.accept()
        done: list[float] = []
        reader = _in_thread(3, done)  # forked while the caller holds the connection
        time.sleep(0.5)
        connection.close()  # the caller is done with it (an idle keep-alive, say)
        client.settimeout(2)
        # The client learns at once (FIN), not when the child ends: a request it sent now
        # would otherwise wait unread and end in a reset.
        assert client.recv(1) == b""
        assert not done
        client.close()
        reader.join()
