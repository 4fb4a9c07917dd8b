"""Run a function on untrusted input in a child process bounded in CPU time, memory and wall
time, so that a hostile file costs the caller (a web worker) at most the wall limit and none
of its memory.

The child is forked from the caller, so it starts in milliseconds with the readers already
imported and shares the caller's memory copy-on-write (a forkserver or spawn would re-run the
caller's main script in each child). In the child, ``RLIMIT_CPU`` stops a busy loop
(SIGXCPU) and ``RLIMIT_AS``, set to what the child has mapped at the fork plus the memory
limit, turns a runaway allocation into a MemoryError; the parent kills the child at the wall
deadline (time spent waiting is not CPU time), which also bounds a child that a lock held by
another of the caller's threads at the fork would block.

The function's exceptions reach the caller as they are (they must pickle); running out of a
limit is a :class:`LimitExceeded` whose ``kind`` says which limit.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")
LimitKind = Literal["time", "memory", "crash"]


@dataclass(frozen=True)
class Limits:
    """``cpu_seconds`` and ``wall_seconds`` bound the child's CPU and elapsed time;
    ``memory_mb`` is the address space it may add to what it had mapped when forked."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 13.0
    memory_mb: int = 512


class LimitExceeded(Exception):
    """The child ran out of a limit (``kind``: time, memory) or died without an answer
    (``kind``: crash, e.g. its C stack overflowed)."""

    def __init__(self, kind: LimitKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _address_space_now() -> int:
    """Bytes of address space this process has mapped (VmSize), 0 when /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(write_fd: int, func: Callable[..., Any], args: tuple[Any, ...], limits: Limits) -> None:
    cpu = max(1, math.ceil(limits.cpu_seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = _address_space_now() + limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        outcome: tuple[str, Any] = ("ok", func(*args))
    except MemoryError:
        outcome = ("memory", None)
    except BaseException as exc:  # handed to the parent, which re-raises it
        outcome = ("raised", exc)
    try:
        payload = pickle.dumps(outcome)
    except MemoryError:
        payload = pickle.dumps(("memory", None))
    except Exception as exc:  # a result or an exception that does not pickle
        payload = pickle.dumps(("raised", RuntimeError(f"{type(exc).__name__}: {exc}")))
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(payload)


def _read_until(read_fd: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes the pipe; None at the deadline."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            return None
        chunk = os.read(read_fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def run_limited(func: Callable[..., T], *args: Any, limits: Limits) -> T:
    """``func(*args)`` in a bounded child process (its result and exceptions must pickle).

    A bare ``os.fork`` rather than multiprocessing: a daemonic caller (a queue worker) may
    not start multiprocessing children, and the child needs none of its bootstrapping."""
    deadline = time.monotonic() + limits.wall_seconds
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            os.close(read_fd)
            _child(write_fd, func, args, limits)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    data: bytes | None = None
    try:
        data = _read_until(read_fd, deadline)
    finally:
        os.close(read_fd)
        if data is None:  # past the deadline, or the caller was interrupted
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if data is None:
        raise LimitExceeded("time", f"took longer than {limits.wall_seconds:g} s")
    if not data:
        raise _death(os.waitstatus_to_exitcode(status), limits)
    kind, payload = pickle.loads(data)  # written by our own child, not by the file
    if kind == "memory":
        raise LimitExceeded("memory", f"needed more than {limits.memory_mb} MB of memory")
    if kind == "raised":
        raise payload
    return payload


def _death(exitcode: int, limits: Limits) -> LimitExceeded:
    """Why a child died without an answer, from its exit status."""
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return LimitExceeded("time", f"used more than {limits.cpu_seconds:g} s of CPU time")
    if exitcode == -signal.SIGSEGV:
        # Python's own recursion limit is caught as an exception; a segfault is a C stack
        # overflow or a reader bug that the memory limit provoked.
        return LimitExceeded("crash", "crashed the reader")
    return LimitExceeded("crash", f"stopped the reader (exit status {exitcode})")


__all__ = ["LimitExceeded", "Limits", "run_limited"]
