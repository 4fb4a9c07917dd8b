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

import math
import multiprocessing
import resource
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal, TypeVar

T = TypeVar("T")
LimitKind = Literal["time", "memory", "crash"]


@dataclass(frozen=True)
class Limits:
    """``cpu_seconds`` and ``wall_seconds`` bound the child's CPU and elapsed time;
    ``memory_mb`` is the address space it may add to what it had mapped when forked."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 10.0
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


def _child(
    send: Connection, func: Callable[..., Any], args: tuple[Any, ...], limits: Limits
) -> None:
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
        send.send(outcome)
    except MemoryError:
        send.send(("memory", None))
    except Exception as exc:  # an exception or result that does not pickle
        send.send(("raised", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        send.close()


def run_limited(func: Callable[..., T], *args: Any, limits: Limits) -> T:
    """``func(*args)`` in a bounded child process (its result and exceptions must pickle)."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(send, func, args, limits))
    process.start()
    send.close()
    try:
        if not receive.poll(limits.wall_seconds):
            raise LimitExceeded("time", f"took longer than {limits.wall_seconds:g} s")
        try:
            status, payload = receive.recv()
        except (EOFError, OSError):
            process.join(1)
            raise _death(process.exitcode, limits) from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receive.close()
    if status == "memory":
        raise LimitExceeded("memory", f"needed more than {limits.memory_mb} MB of memory")
    if status == "raised":
        raise payload
    return payload


def _death(exitcode: int | None, limits: Limits) -> LimitExceeded:
    """Why a child died without an answer, from its exit status."""
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return LimitExceeded("time", f"used more than {limits.cpu_seconds:g} s of CPU time")
    if exitcode == -signal.SIGSEGV:
        # Python's own recursion limit is caught as an exception; a segfault is a C stack
        # overflow or a reader bug that the memory limit provoked.
        return LimitExceeded("crash", "crashed the reader")
    return LimitExceeded("crash", f"stopped the reader (exit status {exitcode})")


__all__ = ["LimitExceeded", "Limits", "run_limited"]
