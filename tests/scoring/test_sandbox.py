"""The child process that untrusted files are read in: each limit stops it with its own kind,
and what the function raises or returns reaches the caller."""

from __future__ import annotations

import os

import pytest

from scoring.sandbox import LimitExceeded, Limits, run_limited


def _spin() -> None:
    while True:
        pass


def _allocate(megabytes: int) -> int:
    blocks = [bytearray(2**20) for _ in range(megabytes)]
    return len(blocks)


def _fail() -> None:
    raise KeyError("the reader's own error")


def test_a_busy_child_is_stopped_by_the_cpu_limit() -> None:
    with pytest.raises(LimitExceeded) as info:
        run_limited(_spin, limits=Limits(cpu_seconds=1, wall_seconds=30))
    assert info.value.kind == "time"


def test_a_child_waiting_past_the_wall_deadline_is_killed() -> None:
    import time

    with pytest.raises(LimitExceeded) as info:
        run_limited(time.sleep, 60, limits=Limits(cpu_seconds=30, wall_seconds=1))
    assert info.value.kind == "time" and "longer than 1 s" in str(info.value)


def test_an_allocation_over_the_memory_limit_is_a_memory_error() -> None:
    with pytest.raises(LimitExceeded) as info:
        run_limited(_allocate, 1024, limits=Limits(memory_mb=128))
    assert info.value.kind == "memory" and "128 MB" in str(info.value)
    # Under the limit the same work succeeds: the limit is what stopped it.
    assert run_limited(_allocate, 32, limits=Limits(memory_mb=128)) == 32


def test_results_and_exceptions_cross_back() -> None:
    assert run_limited(sum, [1, 2, 3], limits=Limits()) == 6
    with pytest.raises(KeyError, match="the reader's own error"):
        run_limited(_fail, limits=Limits())


def test_a_child_asleep_without_using_cpu_is_stopped_as_stalled() -> None:
    """A lock held by another thread at the fork never comes free in the child: it sleeps
    using no CPU, and is stopped long before the wall backstop."""
    import time

    started = time.monotonic()
    with pytest.raises(LimitExceeded) as info:
        run_limited(
            time.sleep, 120, limits=Limits(cpu_seconds=30, wall_seconds=120, stall_seconds=1)
        )
    assert info.value.kind == "time" and "stopped making progress for 1 s" in str(info.value)
    assert time.monotonic() - started < 60


def test_the_cpu_limit_is_the_childs_cpu_time_not_the_clock() -> None:
    with pytest.raises(LimitExceeded) as info:
        run_limited(_spin, limits=Limits(cpu_seconds=0.5, wall_seconds=60))
    assert "used more than 0.5 s of CPU time" in str(info.value)


def test_the_heartbeat_is_called_while_the_child_runs() -> None:
    import time

    beats: list[float] = []
    assert run_limited(time.sleep, 0.6, limits=Limits(), heartbeat=lambda: beats.append(1)) is None
    assert len(beats) >= 2


def _own_niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_the_child_reads_at_a_lower_cpu_priority_than_its_caller() -> None:
    # Issue 35: the pages of everybody else get the CPU before one participant's file.
    mine = _own_niceness()
    assert run_limited(_own_niceness, limits=Limits(cpu_seconds=5, nice=10)) == min(19, mine + 10)
    assert run_limited(_own_niceness, limits=Limits(cpu_seconds=5, nice=0)) == mine
    assert _own_niceness() == mine  # the caller's own priority is untouched
    assert Limits().nice == 0  # by default at the caller's priority (PDF_PARSE_NICE)
