from __future__ import annotations

import asyncio
import json
import subprocess
import sys
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
from scoring.judges.reply import send
from scoring.judges.server import JSON_SCHEMA
from scoring.judges.wire import _strict_schema_text, response_format
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


def test_strict_schema_is_built_once_and_handed_out_as_a_copy() -> None:
    first = strict_json_schema(Answer)
    first["required"].append("changed by the caller")
    first["properties"].clear()
    second = strict_json_schema(Answer)
    assert second["required"] == ["label", "score"]
    assert set(second["properties"]) == {"label", "score"}
    assert _strict_schema_text.cache_info().hits >= 1


def test_messages_and_format_go_out_as_the_library_would_send_them() -> None:
    """``send`` passes the messages and the response format around the client library's
    per-call transform: the server must receive the same request body all the same."""
    kwargs: dict[str, Any] = {
        "model": "m1",
        "messages": [
            {"role": "system", "content": "judge"},
            {"role": "user", "content": "truth é\n[3] finding"},
        ],
        "response_format": response_format(JSON_SCHEMA, Answer),
        "seed": 7,
        "max_completion_tokens": 40,
        "timeout": 5,
    }
    with FakeOpenAI(lambda body: completion('{"label": "a", "score": 1}')) as server:

        async def go() -> None:
            client = make_client(LLMConfig(model="m1", base_url=server.base_url, timeout_s=5))
            try:
                await client.chat.completions.with_raw_response.create(**kwargs)
                await send(client, kwargs, stream=False, timeout_s=5, base_url=server.base_url)
                await send(client, kwargs, stream=True, timeout_s=5, base_url=server.base_url)
            finally:
                await client.close()

        asyncio.run(go())
    library, plain, streamed = server.requests
    assert plain == library
    assert streamed == {**library, "stream": True, "stream_options": {"include_usage": True}}
    assert plain["messages"][1]["content"] == "truth é\n[3] finding"
    assert kwargs["messages"][0] == {"role": "system", "content": "judge"}  # left as it was


def test_warm_up_loads_what_the_first_call_would() -> None:
    """In a fresh interpreter (this one imported them for the other tests): what a process's
    first call imports is loaded by the warm-up, before ``run_wait`` forks its helpers."""
    check = (
        "import sys\n"
        "from scoring.judges.llm_client import client_warm_up\n"
        "before = {m for m in ('openai.resources.chat.completions.completions',"
        " 'anyio._core._sockets') if m in sys.modules}\n"
        "client_warm_up()\n"
        "print(sorted(before), 'openai.resources.chat.completions.completions' in sys.modules,"
        " 'anyio._core._sockets' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["[]", "True", "True"]
