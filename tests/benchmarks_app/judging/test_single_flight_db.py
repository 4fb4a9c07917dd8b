# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Single flight across processes: a JudgeInFlight row makes other askers wait for its answer.

The other asker is played by the test: it inserts the row (as another process would), then
caches the answer, deletes the row, or lets it expire.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections
from django.utils import timezone

from benchmarks_app.models import JudgeCacheEntry, JudgeCall, JudgeInFlight
from benchmarks_app.services.judging import DbJudgeCache, ledger_recorder
from scoring.judges.llm import make_client, structured_call
from tests.benchmarks_app.judging.helpers import QUESTION, Answer, ask, config_for
from tests.benchmarks_app.judging.test_ledger import KEY
from tests.factories.common import RunFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db(transaction=True)

OTHER = "other-host:4242#deadbeef"


def _held(*, expires_in_s: float) -> JudgeInFlight:
    return JudgeInFlight.objects.create(
        key=KEY, holder=OTHER, expires_at=timezone.now() + timedelta(seconds=expires_in_s)
    )


def _answer(body: dict[str, Any]) -> Any:
    return completion('{"label": "mine", "score": 1}')


def _ask_while(srv: FakeOpenAI, other: Any, *, recorder: Any) -> Answer:
    """Ask the question while ``other`` (a coroutine: the other asker) runs beside it."""
    config = config_for(srv)

    async def go() -> Answer:
        client = make_client(config)
        try:
            answer: Answer
            answer, _ = await asyncio.gather(
                structured_call(
                    client, config=config, cache=DbJudgeCache(), record=recorder, **QUESTION
                ),
                other,
            )
            return answer
        finally:
            await client.close()

    return async_to_sync(go)()


def test_a_question_held_elsewhere_is_waited_for_and_its_answer_used() -> None:
    run = RunFactory()
    _held(expires_in_s=120)
    recorder = ledger_recorder(run, holder="piece-3:1")

    async def other_asker() -> None:
        await asyncio.sleep(0.6)
        await sync_to_async(DbJudgeCache().put)(
            KEY,
            {"label": "theirs", "score": 9},
            judge="ledger-test",
            model="m",
            prompt_version="v1",
            vote_number=1,
        )

    with FakeOpenAI(_answer) as srv:
        answer = _ask_while(srv, other_asker(), recorder=recorder)
        recorder.flush()
    assert answer == Answer(label="theirs", score=9)
    assert srv.requests == []
    assert list(JudgeCall.objects.values_list("status", "holder")) == [("cached", "piece-3:1")]
    # The other asker's row is its own to delete.
    assert list(JudgeInFlight.objects.values_list("holder", flat=True)) == [OTHER]


def test_a_question_whose_asker_gave_up_is_asked_here() -> None:
    _held(expires_in_s=120)

    async def failing_asker() -> None:
        await asyncio.sleep(0.6)
        await sync_to_async(JudgeInFlight.objects.filter(key=KEY).delete)()

    with FakeOpenAI(_answer) as srv:
        answer = _ask_while(srv, failing_asker(), recorder=None)
    assert answer == Answer(label="mine", score=1)
    assert len(srv.requests) == 1
    assert not JudgeInFlight.objects.exists()
    assert JudgeCacheEntry.objects.get(key=KEY).response == {"label": "mine", "score": 1}


def test_an_expired_claim_is_taken_over() -> None:
    _held(expires_in_s=-1)  # its asker died
    holders: list[str] = []

    def handler(body: dict[str, Any]) -> Any:
        try:
            holders.extend(JudgeInFlight.objects.values_list("holder", flat=True))
        finally:
            connections.close_all()
        return _answer(body)

    with FakeOpenAI(handler) as srv:
        answer = ask(srv, cache=DbJudgeCache(holder="piece-5:3"), record=None)
    assert answer == Answer(label="mine", score=1)
    assert len(srv.requests) == 1
    assert len(holders) == 1 and holders[0].startswith("piece-5:3#")
    assert not JudgeInFlight.objects.exists()
