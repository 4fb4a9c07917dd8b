"""The child process that untrusted files are read in: each limit stops it with its own kind,
and what the function raises or returns reaches the caller."""

from __future__ import annotations

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
