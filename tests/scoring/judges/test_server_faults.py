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


def _probe(srv: FakeOpenAI) -> Any:
    async def go() -> Any:
        client = make_client(LLMConfig(model="m", base_url=srv.base_url))
        try:
            return await probe_server(client, model="m", temperature=None, base_url=srv.base_url)
        finally:
            await client.close()

    return asyncio.run(go())


def test_the_probe_reads_llama_cpp_props_and_speed() -> None:
    props = {"total_slots": 2, "default_generation_settings": {"n_ctx": 4096}}
    answer = {**completion('{"ok": true}'), "timings": {"predicted_per_second": 3.5}}
    with FakeOpenAI(lambda _: answer, pages={"/props": props}) as srv:
        profile = _probe(srv)
    assert (profile.context_tokens, profile.slots) == (4096, 2)
    assert (profile.tokens_per_s, profile.speed_source) == (3.5, "server")


def test_the_probe_reads_vllm_max_model_len() -> None:
    models = {"object": "list", "data": [{"id": "m", "max_model_len": 8192}]}
    with FakeOpenAI(lambda _: completion('{"ok": true}'), pages={"/v1/models": models}) as srv:
        profile = _probe(srv)
    assert (profile.context_tokens, profile.slots) == (8192, None)


def test_a_slow_servers_speed_lowers_the_bound_and_says_so() -> None:
    from scoring.judges.llm import fit_to_server
    from scoring.judges.server import ServerProfile

    config = LLMConfig(model="m", timeout_s=120, max_answer_tokens=4096)
    config.profile = ServerProfile(tokens_per_s=3.5, speed_source="server")
    notes = fit_to_server(config)
    assert config.max_answer_tokens == int(3.5 * 120 * 0.8)
    assert len(notes) == 1 and "JUDGE_MAX_ANSWER_TOKENS" in notes[0] and "3.5" in notes[0]
    # A speed only measured by the probe (network and prompt included) changes nothing.
    remote = LLMConfig(model="m", timeout_s=120, max_answer_tokens=4096)
    remote.profile = ServerProfile(tokens_per_s=3.5, speed_source="measured")
    assert fit_to_server(remote) == [] and remote.max_answer_tokens == 4096


def test_the_bound_sent_leaves_room_for_the_prompt_in_the_servers_context() -> None:
    from scoring.judges.server import ServerProfile

    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: completion('{"label": "a"}')) as srv:
        config_kw = {"max_answer_tokens": 4096, "timeout_s": 5}
        config = LLMConfig(model="m", base_url=srv.base_url, **config_kw)  # type: ignore[arg-type]
        config.profile = ServerProfile(context_tokens=4096)

        async def go() -> Answer:
            client = make_client(config)
            try:
                return await structured_call(
                    client,
                    config=config,
                    judge_name="t",
                    prompt_version="v1",
                    system="sys",
                    user="word " * 2000,
                    schema=Answer,
                    vote_number=1,
                    record=records.append,
                    sleep=_no_sleep,
                )
            finally:
                await client.close()

        asyncio.run(go())
    sent = srv.requests[0]["max_completion_tokens"]
    prompt_estimate = len("word " * 2000) // 4
    assert 256 <= sent < 4096 and sent + prompt_estimate <= 4096
    assert records[0].request["max_completion_tokens"] == sent


def test_an_error_inside_a_stream_is_retried_as_transient() -> None:
    answers = iter(
        [
            Events([chunk('{"la'), {"error": {"message": "slot crashed"}}], done=False),
            Events([chunk('{"label": "b"}', finish_reason="stop")]),
        ]
    )
    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: next(answers)) as srv:
        answer = _call(srv, records=records)
    assert answer == Answer(label="b")
    assert [r.status for r in records] == ["error", "ok"]
    assert "slot crashed" in records[0].error


def test_a_bound_that_alone_fills_the_context_is_said_to() -> None:
    error = {
        "error": {
            "code": 400,
            "message": "request (4400 tokens) exceeds the available context size (4096 tokens)",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 4400,
            "n_ctx": 4096,
        }
    }
    with FakeOpenAI(lambda _: (400, error)) as srv, pytest.raises(VoteFailed) as excinfo:
        _call(srv, max_answer_tokens=4096)
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.CONTEXT
    assert "the answer bound alone fills the context" in reason
    assert "JUDGE_MAX_ANSWER_TOKENS=4,096" in reason and "context 4,096" in reason
