from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import (
    CallRecord,
    LLMConfig,
    MemoryJudgeCache,
    backoff_delay,
    cache_key,
    make_client,
    strict_json_schema,
    structured_call,
)
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body


class Answer(BaseModel):
    label: str
    score: int


async def _no_sleep(_: float) -> None:
    return None


def _call(server: FakeOpenAI, **overrides: Any) -> tuple[Answer, list[CallRecord]]:
    records: list[CallRecord] = []
    config = overrides.pop("config", None) or LLMConfig(
        model="m1", base_url=server.base_url, max_retries=3, timeout_s=5
    )

    async def go() -> Answer:
        client = make_client(config)
        try:
            return await structured_call(
                client,
                config=config,
                judge_name="t",
                prompt_version="v1",
                system="sys",
                user="question",
                schema=Answer,
                vote_number=overrides.pop("vote_number", 1),
                record=records.append,
                sleep=_no_sleep,
                **overrides,
            )
        finally:
            await client.close()

    return asyncio.run(go()), records


def test_schema_request_parse_and_token_usage() -> None:
    with FakeOpenAI(lambda body: completion('{"label": "a", "score": 3}', tokens_in=5)) as srv:
        answer, records = _call(srv)
    assert answer == Answer(label="a", score=3)
    fmt = srv.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert srv.requests[0]["model"] == "m1"
    assert [(r.status, r.tokens_in, r.tokens_out, r.attempt) for r in records] == [("ok", 5, 7, 1)]


def test_json_mode_puts_schema_in_prompt() -> None:
    with FakeOpenAI(lambda body: completion('```json\n{"label": "b", "score": 1}\n```')) as srv:
        config = LLMConfig(model="m", base_url=srv.base_url, json_mode=True)
        answer, _ = _call(srv, config=config)
    assert answer.label == "b"
    assert srv.requests[0]["response_format"] == {"type": "json_object"}
    assert '"score"' in srv.requests[0]["messages"][0]["content"]


def test_transient_errors_retried_then_recover() -> None:
    statuses = iter([500, 429, 200])

    def handler(body: dict[str, Any]) -> Any:
        status = next(statuses)
        if status != 200:
            return status, error_body("busy")
        return completion('{"label": "ok", "score": 1}')

    with FakeOpenAI(handler) as srv:
        answer, records = _call(srv)
    assert answer.label == "ok"
    assert [r.status for r in records] == ["error", "error", "ok"]
    assert [r.attempt for r in records] == [1, 2, 3]


def test_transient_errors_exhaust_retries_and_fail_uncached() -> None:
    cache = MemoryJudgeCache()
    with FakeOpenAI(lambda body: (503, error_body("down"))) as srv:
        config = LLMConfig(model="m", base_url=srv.base_url, max_retries=2)
        with pytest.raises(VoteFailed) as excinfo:
            _call(srv, config=config, cache=cache)
    assert len(srv.requests) == 3
    assert "InternalServerError" in excinfo.value.reason
    assert len(cache) == 0


def test_client_error_not_retried() -> None:
    with (
        FakeOpenAI(lambda body: (400, error_body("bad request"))) as srv,
        pytest.raises(VoteFailed),
    ):
        _call(srv)
    assert len(srv.requests) == 1


def test_invalid_answer_asked_again_once_with_feedback() -> None:
    answers = iter(['{"label": "x"}', '{"label": "good", "score": 2}'])
    with FakeOpenAI(lambda body: completion(next(answers))) as srv:
        answer, records = _call(srv)
    assert answer.score == 2
    assert [r.status for r in records] == ["invalid", "ok"]
    assert "invalid" in srv.requests[1]["messages"][-1]["content"]


def test_validate_rejects_twice_then_vote_fails() -> None:
    answer = completion('{"label": "x", "score": -1}')
    with FakeOpenAI(lambda body: answer) as srv, pytest.raises(VoteFailed) as excinfo:
        _call(srv, validate=lambda a: "negative score" if a.score < 0 else None)
    assert "negative score" in excinfo.value.reason
    assert len(srv.requests) == 2


def test_cache_hit_costs_no_call_and_vote_number_is_part_of_key() -> None:
    cache = MemoryJudgeCache()
    with FakeOpenAI(lambda body: completion('{"label": "c", "score": 9}')) as srv:
        _call(srv, cache=cache)
        answer, records = _call(srv, cache=cache)
        assert len(srv.requests) == 1
        assert answer.score == 9 and [r.status for r in records] == ["cached"]
        _call(srv, cache=cache, vote_number=2)
        assert len(srv.requests) == 2
    assert len(cache) == 2


def test_cache_key_and_backoff() -> None:
    base = dict(judge="j", model="m", prompt_version="v", prompt_text="p", vote_number=1)
    key = cache_key(**base)  # type: ignore[arg-type]
    assert len(key) == 64
    for field, value in [("model", "m2"), ("prompt_text", "q"), ("vote_number", 2)]:
        assert cache_key(**{**base, field: value}) != key  # type: ignore[arg-type]
    config = LLMConfig(model="m", backoff_base_s=1, backoff_max_s=5)
    delays = [backoff_delay(config, 10) for _ in range(50)]
    assert all(0 <= d <= 5 for d in delays) and len(set(delays)) > 1


def test_strict_schema_requires_all_fields() -> None:
    schema = strict_json_schema(Answer)
    assert schema["required"] == ["label", "score"]
    assert json.dumps(schema).count("additionalProperties") == 1
