"""Chaos with real ``qcluster`` processes (issue 16): every run ends by itself, and ends right.

Each scenario runs in a driver subprocess (:mod:`benchmarks_app.bench.cluster`, scenarios in
:mod:`tests.benchmarks_app.queue.chaos`) against a database of its own and a fake judge that
counts what it answers: on SQLite with the ORM broker always, and on PostgreSQL with Redis when
the test database is PostgreSQL and ``REDIS_URL`` is set (CI's second pass). The scenarios of
one database start together at the first test that needs one, so the file takes about as long
as its slowest scenario. Time bounds here are liveness bounds (lease + sweep + a wide margin),
never performance figures.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from benchmarks_app.bench.cluster import drive

pytestmark = pytest.mark.chaos

# A dead worker's piece is handed out again after its lease expires, at the sweeper's next
# pass (a schedule every minute, seen by django-q2 every 30 s): lease + 90 s at worst.
SWEEP_S = 90
MARGIN_S = 60

SCENARIOS: dict[str, dict[str, Any]] = {
    "kill": {"scenario": "kill"},
    # Patience shorter than the outage: the run pauses as waiting, the sweeper re-queues it.
    "outage_pause": {"scenario": "outage", "set": "JUDGE_OUTAGE_PATIENCE_S=10"},
    # Patience longer than the outage, connections dropped: the run rides it out.
    "outage_ride": {
        "scenario": "outage",
        "set": "JUDGE_OUTAGE_PATIENCE_S=150",
        "down_mode": "drop",
    },
    "timeout": {"scenario": "timeout"},
    "identical": {"scenario": "identical"},
    "sigterm": {"scenario": "sigterm"},
}

_launched: dict[str, dict[str, Future[dict[str, Any]]]] = {}


def _postgres_options() -> dict[str, str] | None:
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        return None
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host, port = s.get("HOST") or "127.0.0.1", s.get("PORT") or 5432
    return {
        "pg_url": f"postgres://{s.get('USER') or 'postgres'}{password}@{host}:{port}/postgres",
        "redis_url": os.environ["REDIS_URL"],
    }


def result(db: str, name: str) -> dict[str, Any]:
    """The figures of scenario ``name`` on ``db``; the first call starts them all."""
    if db not in _launched:
        options = {} if db == "sqlite" else _postgres_options()
        if options is None:
            pytest.skip("needs a PostgreSQL test database and REDIS_URL (CI's second pass)")
        pool = ThreadPoolExecutor(max_workers=len(SCENARIOS), thread_name_prefix=f"chaos-{db}")
        _launched[db] = {
            key: pool.submit(drive, db=db, timeout_s=900, **options, **spec)
            for key, spec in SCENARIOS.items()
        }
        pool.shutdown(wait=False)
    figures = _launched[db][name].result()
    print(f"{name} on {db}:", json.dumps(figures))  # shown with -rA, and on failure
    assert "error" not in figures, figures.get("error", "") + figures.get("stderr", "")
    return figures


def _ended_right(r: dict[str, Any]) -> None:
    """Every run succeeded with the reference's verdicts, no result row twice, and the ledger
    holds no more answered calls than the judge gave."""
    assert r["statuses"] and set(r["statuses"].values()) == {"succeeded"}, (r["statuses"], r)
    assert r["verdicts_identical"], r["mismatches"]
    assert r["truth_findings"] > 0
    assert r["duplicate_results"] == 0
    assert r["ledger"].get("ok", 0) <= r["judge_answered"], r["ledger"]
    assert r["ledger"].get("pending", 0) == 0, r["ledger"]


# Not "db": that is pytest-django's fixture, and these tests use no test database.
DATABASES = ["sqlite", "postgres"]


@pytest.mark.parametrize("database", DATABASES)
def test_kill_9_of_a_cluster_mid_run_heals_by_itself(database: str) -> None:
    r = result(database, "kill")
    assert r["killed_holding"] >= 1, "the killed cluster held no piece: nothing was tested"
    _ended_right(r)
    assert r["elapsed_after_kill_s"] is not None
    assert r["elapsed_after_kill_s"] <= r["lease_s"] + SWEEP_S + MARGIN_S, r
    assert r["survivor_alive"]
    assert r["mid_run_at_kill"], "no judge call was in flight at the kill"
    # Answered calls missing from the ledger are at most those in flight at the kill, and
    # each is there as lost (its pending row, given up when the piece was taken over).
    unrecorded = r["judge_answered"] - r["ledger"].get("ok", 0)
    assert 0 <= unrecorded <= r["in_flight_bound"], (r["ledger"], r["judge_answered"])
    assert unrecorded <= r["ledger"].get("lost", 0), (r["ledger"], r["judge_answered"])
    assert r["max_piece_attempt"] >= 2, "no piece was taken over after the kill"


@pytest.mark.parametrize("database", DATABASES)
@pytest.mark.parametrize("name", ["outage_pause", "outage_ride"])
def test_judge_outage_ends_in_finished_identical_runs(database: str, name: str) -> None:
    r = result(database, name)
    assert r["judge_refused"] > 0, "the outage met no call: nothing was tested"
    _ended_right(r)
    assert all(r["clusters_alive"]), r["cluster_warnings"]
    assert r["elapsed_after_outage_start_s"] is not None
    if r["patience_s"] < r["outage_s"]:
        assert r["paused"], r["statuses_seen"]
    else:
        assert not r["paused"], r["statuses_seen"]


@pytest.mark.parametrize("database", DATABASES)
def test_piece_past_q_timeout_is_requeued_and_finishes(database: str) -> None:
    r = result(database, "timeout")
    _ended_right(r)
    assert all(r["clusters_alive"]), r["cluster_warnings"]
    assert r["max_piece_attempt"] >= 2, "the piece never exceeded Q_TIMEOUT"
    assert r["elapsed_s"] is not None


@pytest.mark.parametrize("database", DATABASES)
def test_identical_questions_at_once_are_paid_once(database: str) -> None:
    r = result(database, "identical")
    _ended_right(r)
    assert all(r["clusters_alive"]), r["cluster_warnings"]
    assert len(r["statuses"]) == 4
    assert r["distinct_questions"] > 0
    assert r["judge_answered"] == r["distinct_questions"], r
    assert r["ledger"].get("ok", 0) == r["distinct_questions"], r["ledger"]


@pytest.mark.parametrize("database", DATABASES)
def test_sigterm_to_a_cluster_group_stops_it_within_10s(database: str) -> None:
    r = result(database, "sigterm")
    assert r["busy_at_sigterm"], "the cluster held no piece when signalled"
    assert r["exit_s"] is not None and r["exit_s"] <= 10, r
    assert r["leftover"] == []
    # What it held goes on elsewhere.
    _ended_right(r)
