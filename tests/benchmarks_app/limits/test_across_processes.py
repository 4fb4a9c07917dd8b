"""Issue 35: limits hold across processes. Each test starts two separate Django processes
sharing the test's database and the production cache (the database's table, or Redis with
REDIS_URL), as two gunicorn workers or a web and a queue process do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks_app.limits.processes import Worker, key_prefix, shared_database_url
from tests.scoring.checklist.pdf_fixtures import SAMPLE_PAPERS

# The rows the workers write (users, tokens) are committed: flushed after each test.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[object]:
    """``start(action, *args, **env)``: a ready worker; every one is stopped at the end."""
    database_url = shared_database_url(tmp_path)
    prefix = key_prefix()
    workers: list[Worker] = []

    def started(action: str, *args: str, **env: str) -> Worker:
        worker = Worker(database_url, prefix, action, *args, MEDIA_ROOT=str(tmp_path), **env)
        workers.append(worker)
        return worker

    yield started
    for worker in workers:
        worker.stop()


def _both_ready(*workers: Worker) -> None:
    # Started together, waited for together: Django's set-up dominates a worker's start.
    for worker in workers:
        worker.ready()


def test_account_mail_caps_hold_across_two_processes(start) -> None:
    caps = {"ACCOUNT_MAILS_PER_ADDRESS_HOUR": "3", "ACCOUNT_MAILS_PER_CLIENT_HOUR": "100"}
    first = start("mail", "victim@example.org", "198.51.100.7", "10", **caps)
    second = start("mail", "victim@example.org", "198.51.100.8", "10", **caps)
    _both_ready(first, second)
    allowed = first.go()["allowed"] + second.go()["allowed"]
    # A cache per process allowed 3 in each (6); the shared count allows 3 in all.
    assert allowed == 3


def test_api_throttle_holds_across_two_processes(start) -> None:
    rate = {"API_THROTTLE_ANON": "6/min"}
    first, second = start("api", "5", **rate), start("api", "5", **rate)
    _both_ready(first, second)
    codes = first.go()["codes"] + second.go()["codes"]
    assert codes.count(200) == 6 and codes.count(429) == 4
    assert set(codes) == {200, 429}


def test_a_reader_past_the_cap_held_by_another_process_is_refused_at_once(start) -> None:
    """N readers hold the site's N slots in one process; the N+1-th, in another, gets 503 with
    Retry-After without waiting for a slot, and is read once the slots are free."""
    cap = {"PAPER_READERS_MAX": "2"}
    holder = start("hold", "2", **cap)
    reader = start("extract", str(SAMPLE_PAPERS / "AutoSurvey.pdf"), **cap)
    _both_ready(holder, reader)
    assert holder.go() == {"held": 2}

    refused = reader.go()
    assert refused["status"] == 503
    assert int(refused["retry_after"]) >= 1
    assert refused["body"]["code"] == "readers_busy"
    assert refused["body"]["retry_after_s"] == int(refused["retry_after"])
    assert "2 papers already" in refused["body"]["detail"]
    # Refused, not queued: no paper was read (one reads in a second or more here).
    assert refused["elapsed_s"] < 5

    holder.stop()  # its slots go with it
    read = reader.go()
    assert read["status"] == 200, read["body"]
    assert read["body"]["complete"] is True
