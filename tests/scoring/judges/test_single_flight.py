"""One question, one paid call: concurrent callers of the same question share one request."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

from scoring.judges import flight
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import (
    CallRecord,
    LLMConfig,
    MemoryJudgeCache,
    make_client,
    structured_call,
)
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body


class Answer(BaseModel):
    label: str
    score: int


def _slow_answer(body: dict[str, Any]) -> Any:
    time.sleep(0.2)  # long enough for every caller to arrive while it is being asked
    return completion('{"label": "a", "score": 4}')


def _many(
    srv: FakeOpenAI, n: int, *, cache: MemoryJudgeCache | None, vote_number: int = 1
) -> tuple[list[Any], list[CallRecord]]:
    config = LLMConfig(model="m", base_url=srv.base_url, max_retries=0, timeout_s=5)
    records: list[CallRecord] = []

    async def one(client: Any) -> Answer:
        return await structured_call(
            client,
            config=config,
            judge_name="t",
            prompt_version="v1",
            system="sys",
            user="the same question",
            schema=Answer,
            vote_number=vote_number,
            cache=cache,
            record=records.append,
        )

    async def go() -> list[Any]:
        client = make_client(config)
        try:
            calls = [one(client) for _ in range(n)]
            return list(await asyncio.gather(*calls, return_exceptions=True))
        finally:
            await client.close()

    return asyncio.run(go()), records


def test_concurrent_callers_of_one_question_pay_for_one_request() -> None:
    cache = MemoryJudgeCache()
    with FakeOpenAI(_slow_answer) as srv:
        results, records = _many(srv, 6, cache=cache)
    assert len(srv.requests) == 1
    assert results == [Answer(label="a", score=4)] * 6
    assert sorted(r.status for r in records) == ["cached"] * 5 + ["ok"]
    assert len(cache) == 1
    assert flight.in_flight() == 0


def test_without_a_cache_callers_still_share_the_request() -> None:
    with FakeOpenAI(_slow_answer) as srv:
        results, _ = _many(srv, 4, cache=None)
    assert len(srv.requests) == 1
    assert results == [Answer(label="a", score=4)] * 4


def test_different_votes_are_different_questions() -> None:
    with FakeOpenAI(_slow_answer) as srv:
        _many(srv, 3, cache=MemoryJudgeCache(), vote_number=1)
        _many(srv, 3, cache=MemoryJudgeCache(), vote_number=2)
    assert len(srv.requests) == 2


def test_when_the_asker_fails_the_next_caller_asks_itself() -> None:
    answers = iter([(400, error_body("rejected once")), completion('{"label": "b", "score": 2}')])

    def handler(body: dict[str, Any]) -> Any:
        time.sleep(0.2)
        return next(answers)

    with FakeOpenAI(handler) as srv:
        results, records = _many(srv, 4, cache=MemoryJudgeCache())
    assert len(srv.requests) == 2
    failed = [r for r in results if isinstance(r, VoteFailed)]
    assert len(failed) == 1 and "rejected once" in failed[0].reason
    assert [r for r in results if not isinstance(r, VoteFailed)] == [Answer(label="b", score=2)] * 3
    assert sorted(r.status for r in records) == ["cached", "cached", "error", "ok"]
