"""Run a function on untrusted input in a child process bounded in CPU time, memory and wall
time, so that a hostile file costs the caller (a web worker) at most the wall limit and none
of its memory.

The child is forked from the caller, so it starts in milliseconds with the readers already
imported and shares the caller's memory copy-on-write (a forkserver or spawn would re-run the
caller's main script in each child). In the child, ``RLIMIT_CPU`` stops a busy loop
(SIGXCPU) and ``RLIMIT_AS``, set to what the child has mapped at the fork plus the memory
limit, turns a runaway allocation into a MemoryError.

The CPU budget is the bound: on a busy machine the child gets a fraction of a core, and a
genuine file must not be refused because other processes held the CPU. So the parent watches
the child's CPU time (``/proc/<pid>/stat``) rather than the clock: it kills the child once its
CPU time passes the budget (``RLIMIT_CPU`` does too, in whole seconds), once it has been
asleep without using any CPU for ``stall_seconds`` (a lock held by another of the caller's
threads at the fork, which never comes free in the child), and at a generous wall backstop
(``wall_seconds``) whatever it does. Without /proc the wall backstop is the only deadline.

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
    """``cpu_seconds`` bounds the child's CPU time; ``wall_seconds`` is the backstop on its
    elapsed time, whatever the load (set it well above ``cpu_seconds``); ``stall_seconds``
    how long it may sleep using no CPU; ``memory_mb`` is the address space it may add to
    what it had mapped when forked; ``nice`` is added to the child's scheduling niceness.

    With ``nice`` above 0 the child runs at a lower CPU priority than its caller: when the
    machine is busy, the web worker's other threads, serving everybody's pages, get the CPU
    first and the untrusted file the rest (issue 35). Its CPU budget is unchanged; only its
    wall time stretches, so ``wall_seconds`` must grow with it: on a saturated machine a
    child at niceness 10 gets about a hundredth of a CPU."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 120.0
    memory_mb: int = 512
    stall_seconds: float = 5.0
    nice: int = 0


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
    if limits.nice > 0:
        with contextlib.suppress(OSError):  # capped at 19 by the kernel
            os.nice(limits.nice)
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


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# How often the parent looks at the child's CPU time (and calls ``heartbeat``).
POLL_S = 0.1


def _cpu_and_state(pid: int) -> tuple[float, str] | None:
    """The child's CPU seconds (user + system) and its state letter, None without /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, utime and stime fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS, fields[0]


def _read_until(
    read_fd: int, pid: int, limits: Limits, heartbeat: Callable[[], None] | None
) -> bytes | LimitExceeded:
    """Everything the child writes until it closes the pipe, or why it was stopped first."""
    chunks: list[bytes] = []
    started = time.monotonic()
    backstop = started + limits.wall_seconds
    cpu_seen, progressed_at = 0.0, started
    while True:
        now = time.monotonic()
        if now >= backstop:
            return LimitExceeded("time", f"took longer than {limits.wall_seconds:g} s")
        if select.select([read_fd], [], [], min(POLL_S, backstop - now))[0]:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            continue
        if heartbeat is not None:
            heartbeat()
        seen = _cpu_and_state(pid)
        if seen is None:
            continue
        cpu, state = seen
        if cpu > limits.cpu_seconds:
            return LimitExceeded("time", f"used more than {limits.cpu_seconds:g} s of CPU time")
        now = time.monotonic()
        if cpu > cpu_seen or state not in ("S", "D"):
            cpu_seen, progressed_at = cpu, now
        elif now - progressed_at > limits.stall_seconds:
            return LimitExceeded("time", f"stopped making progress for {limits.stall_seconds:g} s")


def run_limited(
    func: Callable[..., T],
    *args: Any,
    limits: Limits,
    heartbeat: Callable[[], None] | None = None,
) -> T:
    """``func(*args)`` in a bounded child process (its result and exceptions must pickle);
    ``heartbeat`` is called every :data:`POLL_S` while the child runs (a lease to renew).

    A bare ``os.fork`` rather than multiprocessing: a daemonic caller (a queue worker) may
    not start multiprocessing children, and the child needs none of its bootstrapping."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            _close_inherited(keep=write_fd)
            _child(write_fd, func, args, limits)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    outcome: bytes | LimitExceeded | None = None
    try:
        outcome = _read_until(read_fd, pid, limits, heartbeat)
    finally:
        os.close(read_fd)
        if not isinstance(outcome, bytes):  # stopped, or the caller was interrupted
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if isinstance(outcome, LimitExceeded):
        raise outcome
    if not outcome:
        raise _death(os.waitstatus_to_exitcode(status), limits)
    kind, payload = pickle.loads(outcome)  # written by our own child, not by the file
    if kind == "memory":
        raise LimitExceeded("memory", f"needed more than {limits.memory_mb} MB of memory")
    if kind == "raised":
        raise payload
    return payload


def _close_inherited(*, keep: int) -> None:
    """In the child: close every descriptor inherited from the caller but stdio and ``keep``
    (its pipe). A web worker's child would otherwise hold the worker's client connections:
    one the worker closes (an idle keep-alive) stays open for the client, whose next request
    waits unread until the child exits and then gets a connection reset (issue 35's rush)."""
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (AttributeError, ValueError, OSError):
        return 65536


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
