"""A server that answers HTTP 200 with something that is not a chat completion (issue 24).

Each fake answers the way a misconfigured ``OPENAI_BASE_URL`` does: a proxy's HTML page, a
JSON content type over a body that is not JSON, a completion with no choices, another API's
``{"result": "ok"}``, a message whose content is null. The vote fails as the *server's*
fault, naming the base URL and quoting the first bytes, and the probe says the same.
Streamed answers (server-sent events) are read, a request given up on is closed, and a slow
but live server is "slow", not "unreachable".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.judges import failures
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import CallRecord, LLMConfig, make_client, structured_call
from scoring.judges.server import probe_server
from tests.scoring.judges.fake_openai import Events, FakeOpenAI, Raw, chunk, completion

PROXY_PAGE = Raw(b"<html><body><h1>Welcome to nginx!</h1></body></html>", "text/plain")
NOT_JSON = Raw(b"Internal proxy says hello", "application/json")
EMPTY_CHOICES = Raw(json.dumps({**completion("x"), "choices": []}).encode())
WRONG_SHAPE = Raw(b'{"result": "ok"}')
NULL_CONTENT = Raw(
    json.dumps(
        {"choices": [{"index": 0, "message": {"content": None}, "finish_reason": "stop"}]}
    ).encode()
)

MODES = {
    "html page as text/plain": (PROXY_PAGE, "<html><body><h1>Welcome to nginx!"),
    "json content type, body not json": (NOT_JSON, "Internal proxy says hello"),
    "empty choices": (EMPTY_CHOICES, '"choices": []'),
    "wrong shape": (WRONG_SHAPE, '{"result": "ok"}'),
    "null content": (NULL_CONTENT, '"content": null'),
}


class Answer(BaseModel):
    label: str


async def _no_sleep(_: float) -> None:
    return None


def _call(server: FakeOpenAI, *, records: list[CallRecord] | None = None, **kw: Any) -> Answer:
    kw.setdefault("timeout_s", 5)
    config = LLMConfig(model="m", base_url=server.base_url, max_retries=2, **kw)

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
                vote_number=1,
                record=(records if records is not None else []).append,
                sleep=_no_sleep,
            )
        finally:
            await client.close()

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_body_that_is_not_a_completion_fails_the_vote_as_the_servers_fault(
    mode: str, stream: bool
) -> None:
    body, first_bytes = MODES[mode]
    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: body) as srv, pytest.raises(VoteFailed) as excinfo:
        _call(srv, records=records, stream=stream)
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.SERVER
    assert srv.base_url in reason and "OPENAI_BASE_URL" in reason
    assert first_bytes in reason
    # Not retried (the same body would come back) and not asked again as an invalid answer.
    assert len(srv.requests) == 1
    assert [(r.status, r.raw_response[:20]) for r in records] == [
        ("error", body.body.decode()[:20])
    ]
    cause = failures.summarize([reason])[0]
    assert not cause.resumable and "OPENAI_BASE_URL" in cause.advice


@pytest.mark.parametrize("mode", list(MODES))
def test_the_probe_reports_the_servers_fault(mode: str) -> None:
    body, first_bytes = MODES[mode]

    async def go(url: str) -> Any:
        client = make_client(LLMConfig(model="m", base_url=url))
        try:
            return await probe_server(client, model="m", temperature=None, base_url=url)
        finally:
            await client.close()

    with FakeOpenAI(lambda _: body) as srv:
        profile = asyncio.run(go(srv.base_url))
    assert srv.base_url in profile.fault and first_bytes in profile.fault
    assert any(n.startswith("server fault:") for n in profile.notes)


def test_a_streamed_answer_is_read_with_its_usage_and_reasoning() -> None:
    usage = {
        "prompt_tokens": 30,
        "completion_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    events = [
        chunk(reasoning="Let me think."),
        chunk('{"label"'),
        chunk(': "yes"}', finish_reason="stop"),
        {"id": "x", "choices": [], "usage": usage},
    ]
    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: Events(events)) as srv:
        answer = _call(srv, records=records)
    assert answer == Answer(label="yes")
    assert srv.requests[0]["stream"] is True
    assert srv.requests[0]["stream_options"] == {"include_usage": True}
    record = records[0]
    assert (record.status, record.tokens_in, record.tokens_out, record.tokens_reasoning) == (
        "ok",
        30,
        12,
        5,
    )
    assert record.request["model"] == "m" and record.request["stream"] is True
    assert record.request["response_format"] == "json_schema"
    assert record.request["max_completion_tokens"] == 4096


def test_a_reasoning_model_that_spent_its_bound_thinking_is_told_so() -> None:
    events = [chunk(reasoning="hmm " * 3), chunk(reasoning="more", finish_reason="length")]
    with FakeOpenAI(lambda _: Events(events)) as srv, pytest.raises(VoteFailed) as excinfo:
        _call(srv, max_answer_tokens=64)
    assert failures.kind_of(excinfo.value.reason) == failures.REASONING
    assert "64 tokens" in excinfo.value.reason and len(srv.requests) == 1


def test_a_slow_live_server_is_slow_and_its_abandoned_request_is_closed() -> None:
    # Twenty tokens a second against a one-second timeout: the answer never completes.
    events = [chunk("x") for _ in range(40)]
    with FakeOpenAI(lambda _: Events(events, delay_s=0.05)) as srv:
        with pytest.raises(VoteFailed) as excinfo:
            _call(srv, timeout_s=1, max_answer_tokens=2000)
        # Both attempts were abandoned and their connections closed.
        for _ in range(100):
            if srv.disconnects >= 2:
                break
            asyncio.run(asyncio.sleep(0.05))
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.SLOW
    assert "still generating" in reason and "JUDGE_MAX_ANSWER_TOKENS" in reason
    assert "unreachable" not in reason
    # Asked once more with a request for a short answer, not retried as an outage.
    assert len(srv.requests) == 2
    assert "cut off" in srv.requests[1]["messages"][-1]["content"]
    assert srv.disconnects == 2
