# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""The judge ledger survives a crash: a call is on record before its request goes out.

The real ``openai`` client talks to the local fake server; the fake looks at the database
while it answers (transactional tests: what it sees is committed).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from benchmarks_app.models import JudgeCacheEntry, JudgeCall, JudgeInFlight
from benchmarks_app.services.judging import (
    DbJudgeCache,
    judge_calls_mark_lost,
    ledger_recorder,
    llm_config_for_run,
)
from scoring.judges.cache import cache_key
from scoring.judges.records import CallRecord
from tests.benchmarks_app.judging.helpers import QUESTION, Answer, ask
from tests.factories.common import RunFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

KEY = cache_key(
    judge=QUESTION["judge_name"],
    model="m",
    prompt_version=QUESTION["prompt_version"],
    prompt_text=f"{QUESTION['system']}\n\n{QUESTION['user']}",
    vote_number=QUESTION["vote_number"],
)


def _peek(seen: list[Any]) -> Any:
    """A handler that records the ledger and in-flight rows as the request arrives."""

    def handler(body: dict[str, Any]) -> Any:
        try:
            seen.append(
                {
                    "calls": list(JudgeCall.objects.values_list("status", "holder", "attempt")),
                    "flights": list(JudgeInFlight.objects.values_list("key", flat=True)),
                    "cached": JudgeCacheEntry.objects.filter(key=KEY).exists(),
                }
            )
        finally:
            connections.close_all()
        return completion('{"label": "yes", "score": 3}', tokens_in=40, tokens_out=9)

    return handler


@pytest.mark.django_db(transaction=True)
def test_a_call_is_pending_while_asked_and_ok_with_its_cached_answer_after() -> None:
    run = RunFactory()
    seen: list[Any] = []
    recorder = ledger_recorder(run, holder="piece-7:2")
    with FakeOpenAI(_peek(seen)) as srv:
        answer = ask(srv, cache=DbJudgeCache(), record=recorder)
    assert answer == Answer(label="yes", score=3)
    # While the request was out: one pending row of this holder, one claim, nothing cached.
    assert seen == [{"calls": [("pending", "piece-7:2", 1)], "flights": [KEY], "cached": False}]
    call = JudgeCall.objects.get()
    assert (call.status, call.holder, call.run_id, call.prompt_hash) == (
        "ok",
        "piece-7:2",
        run.pk,
        KEY,
    )
    assert (call.tokens_in, call.tokens_out) == (40, 9) and call.latency_ms > 0
    assert JudgeCacheEntry.objects.get(key=KEY).response == {"label": "yes", "score": 3}
    assert not JudgeInFlight.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_cache_hit_is_recorded_as_cached_and_costs_no_request() -> None:
    run = RunFactory()
    with FakeOpenAI(_peek([])) as srv:
        ask(srv, cache=DbJudgeCache(), record=ledger_recorder(run))
        recorder = ledger_recorder(run, holder="piece-8:1")
        answer = ask(srv, cache=DbJudgeCache(), record=recorder)
        recorder.flush()
    assert answer.score == 3 and len(srv.requests) == 1
    assert list(JudgeCall.objects.order_by("pk").values_list("status", "holder")) == [
        ("ok", ""),
        ("cached", "piece-8:1"),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_answer_is_never_cached_without_its_ledger_row(monkeypatch: Any) -> None:
    def broken_put(self: Any, *args: Any, **kwargs: Any) -> None:
        JudgeCacheEntry.objects.create(
            key=args[0], judge="x", prompt_version="v", vote_number=1, response=args[1]
        )
        raise RuntimeError("disk full")

    monkeypatch.setattr(DbJudgeCache, "put", broken_put)
    run = RunFactory()
    with FakeOpenAI(_peek([])) as srv, pytest.raises(RuntimeError, match="disk full"):
        ask(srv, cache=DbJudgeCache(), record=ledger_recorder(run, holder="h:1"))
    # One transaction: the cache row written before the failure is rolled back, and the
    # ledger row was not completed as ok.
    assert not JudgeCacheEntry.objects.exists()
    assert list(JudgeCall.objects.values_list("status", flat=True)) == ["pending"]


@pytest.mark.django_db
def test_mark_lost_touches_only_the_pending_calls_of_that_holder() -> None:
    run = RunFactory()

    def call(status: str, holder: str) -> JudgeCall:
        return JudgeCall.objects.create(
            run=run, judge="j", prompt_hash="h" * 64, status=status, holder=holder
        )

    dead = [call("pending", "piece-1:1"), call("pending", "piece-1:1")]
    kept = [
        call("ok", "piece-1:1"),
        call("error", "piece-1:1"),
        call("pending", "piece-1:2"),
        call("pending", "piece-2:1"),
        call("pending", ""),
    ]
    assert judge_calls_mark_lost(holder="piece-1:1") == 2
    statuses = dict(JudgeCall.objects.values_list("pk", "status"))
    assert [statuses[c.pk] for c in dead] == ["lost", "lost"]
    assert [statuses[c.pk] for c in kept] == ["ok", "error", "pending", "pending", "pending"]
    assert judge_calls_mark_lost(holder="piece-1:1") == 0
    with pytest.raises(ValueError, match="holder"):
        judge_calls_mark_lost(holder="")


@pytest.mark.django_db
def test_the_run_config_takes_the_outage_patience_from_the_settings() -> None:
    run = RunFactory(judge="openai")
    with override_settings(JUDGE_OUTAGE_PATIENCE_S=42.5):
        assert llm_config_for_run(run).outage_patience_s == 42.5


@pytest.mark.django_db
def test_completions_of_one_trip_each_update_their_own_pending_row_and_leave_lost_ones() -> None:
    """The ``end`` kind's one statement, its rows sent together: each row gets its own
    outcome, and a row given up as lost meanwhile stays lost."""
    from benchmarks_app.services.judging_rounds import _end, pending_row

    run = RunFactory()

    def record(status: str, n: int) -> CallRecord:
        return CallRecord(
            "openai", "m", f"hash{n}", 1, 1, 12.5 * n, 100 * n, 10 * n, status,
            error="" if status == "ok" else f"err {n}", raw_response=f"answer {n} é",
            tokens_reasoning=n, tokens_cached=50 * n,
        )  # fmt: skip

    rows = [pending_row(record("pending", n), run_id=run.pk, holder="piece-1:1") for n in (1, 2, 3)]
    JudgeCall.objects.bulk_create(rows)
    ids = list(JudgeCall.objects.order_by("pk").values_list("pk", flat=True))
    JudgeCall.objects.filter(pk=ids[2]).update(status="lost")
    _end([(ids[0], record("ok", 1), None, None), (ids[1], record("error", 2), None, None),
          (ids[2], record("ok", 3), None, None)])  # fmt: skip
    got = list(
        JudgeCall.objects.order_by("pk").values_list(
            "status", "latency_ms", "tokens_in", "tokens_out", "tokens_reasoning",
            "tokens_cached", "error", "raw_response",
        )
    )  # fmt: skip
    assert got == [
        ("ok", 12.5, 100, 10, 1, 50, "", "answer 1 é"),
        ("error", 25.0, 200, 20, 2, 100, "err 2", "answer 2 é"),
        ("lost", 37.5, 300, 30, 0, 0, "err 3", ""),  # as it was made pending
    ]
