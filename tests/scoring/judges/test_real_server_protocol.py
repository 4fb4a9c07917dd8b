"""The judge layer against the ways real OpenAI-compatible servers answer (issue 17).

Each fake reproduces one behaviour seen on llama.cpp's server or the OpenAI API: context
errors in their two forms, answers cut at the bound, refused request options.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.judges import failures
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import (
    CallRecord,
    ContextOverflow,
    LLMConfig,
    MemoryJudgeCache,
    make_client,
    structured_call,
)
from scoring.judges.server import (
    JSON_OBJECT,
    PROMPT_ONLY,
    AdaptiveLimiter,
    ServerProfile,
    probe_server,
)
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


class Answer(BaseModel):
    label: str
    score: int


async def _no_sleep(_: float) -> None:
    return None


def _config(server: FakeOpenAI, **kw: Any) -> LLMConfig:
    kw.setdefault("max_retries", 2)
    return LLMConfig(model="m", base_url=server.base_url, timeout_s=5, **kw)


def _call(
    server: FakeOpenAI, config: LLMConfig | None = None, **overrides: Any
) -> tuple[Answer, list[CallRecord]]:
    records: list[CallRecord] = []
    config = config or _config(server)

    async def go() -> Answer:
        client = make_client(config)
        try:
            return await structured_call(
                client,
                config=config,
                judge_name="t",
                prompt_version="v1",
                system="sys",
                user="the original question",
                schema=Answer,
                vote_number=overrides.pop("vote_number", 1),
                record=records.append,
                sleep=_no_sleep,
                **overrides,
            )
        finally:
            await client.close()

    return asyncio.run(go()), records


LLAMA_CONTEXT_400 = (
    400,
    {
        "error": {
            "code": 400,
            "message": "request (12914 tokens) exceeds the available context size (8192 tokens),"
            " try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 12914,
            "n_ctx": 8192,
        }
    },
)
LLAMA_SHARED_500 = (
    500,
    {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}},
)


def test_every_request_is_bounded_seeded_per_vote_and_tempered_when_configured() -> None:
    with FakeOpenAI(lambda body: completion('{"label": "a", "score": 1}')) as srv:
        config = _config(srv, max_answer_tokens=321, temperature=0.7, seed=10)
        _call(srv, config, vote_number=2)
        _call(srv, config, vote_number=3)
    first, second = srv.requests
    assert first["max_completion_tokens"] == 321
    assert "max_tokens" not in first
    assert (first["seed"], second["seed"]) == (12, 13)
    assert first["temperature"] == 0.7


def test_no_temperature_is_sent_unless_configured() -> None:
    with FakeOpenAI(lambda body: completion('{"label": "a", "score": 1}')) as srv:
        _call(srv)
    assert "temperature" not in srv.requests[0]
    assert srv.requests[0]["seed"] == 1


def test_cut_answer_is_its_own_case_and_the_reask_never_carries_the_broken_answer() -> None:
    looping = '{"label": "' + "very " * 500
    answers = iter(
        [
            completion(looping, finish_reason="length"),
            completion('{"label": "fine", "score": 4}'),
        ]
    )
    with FakeOpenAI(lambda body: next(answers)) as srv:
        answer, records = _call(srv, _config(srv, max_answer_tokens=64))
    assert answer.score == 4
    assert [r.status for r in records] == ["truncated", "ok"]
    reask = srv.requests[1]["messages"]
    assert [m["role"] for m in reask] == ["system", "user"]
    assert reask[1]["content"].startswith("the original question")
    assert "cut off after 64 tokens" in reask[1]["content"]
    assert "very very" not in json.dumps(reask)


def test_cut_twice_fails_the_vote_as_truncated_naming_the_setting() -> None:
    with (
        FakeOpenAI(lambda body: completion('{"label": "x', finish_reason="length")) as srv,
        pytest.raises(VoteFailed) as excinfo,
    ):
        _call(srv)
    assert failures.kind_of(excinfo.value.reason) == failures.TRUNCATED
    assert "JUDGE_MAX_ANSWER_TOKENS" in failures.ADVICE[failures.TRUNCATED]
    assert len(srv.requests) == 2


def test_invalid_answer_reask_omits_the_answer_and_pydantic_input() -> None:
    secret = "SECRET-BROKEN-ANSWER-TEXT"
    answers = iter([f'{{"label": "{secret}"}}', '{"label": "ok", "score": 2}'])
    with FakeOpenAI(lambda body: completion(next(answers))) as srv:
        _, records = _call(srv)
    assert records[0].status == "invalid"
    assert "score: Field required" in records[0].error
    assert secret not in json.dumps(srv.requests[1])
    assert secret not in records[0].error


def test_a_prompt_too_large_alone_is_a_context_overflow_not_retried() -> None:
    with (
        FakeOpenAI(lambda body: LLAMA_CONTEXT_400) as srv,
        pytest.raises(ContextOverflow) as excinfo,
    ):
        _call(srv)
    assert len(srv.requests) == 1
    assert excinfo.value.detail.prompt_tokens == 12914
    assert excinfo.value.detail.context_tokens == 8192
    assert failures.kind_of(excinfo.value.reason) == failures.CONTEXT
    assert "prompt 12,914 tokens, context 8,192" in excinfo.value.reason


def test_openai_style_context_error_is_recognised() -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, your "
            "messages resulted in 5000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    with FakeOpenAI(lambda _: (400, body)) as srv, pytest.raises(ContextOverflow) as excinfo:
        _call(srv)
    assert (excinfo.value.detail.context_tokens, excinfo.value.detail.prompt_tokens) == (
        4096,
        5000,
    )


def test_shared_context_overflow_narrows_concurrency_and_recovers() -> None:
    """llama.cpp without --parallel: calls in flight together overflow one shared context."""
    # Widening again is tested below; here it must not happen within the test's few calls.
    limiter = AdaptiveLimiter(4, widen_after=100)
    state = {"in_flight": 0}
    lock = threading.Lock()
    barrier_hits: list[int] = []

    def handler(body: dict[str, Any]) -> Any:
        with lock:
            state["in_flight"] += 1
            concurrent = state["in_flight"]
        try:
            time.sleep(0.05)
            barrier_hits.append(concurrent)
            if concurrent > 1:
                return LLAMA_SHARED_500
            return completion('{"label": "ok", "score": 1}')
        finally:
            with lock:
                state["in_flight"] -= 1

    with FakeOpenAI(handler) as srv:
        config = _config(srv, max_retries=0)

        async def go() -> list[Answer]:
            client = make_client(config)
            try:
                return list(
                    await asyncio.gather(
                        *(
                            structured_call(
                                client,
                                config=config,
                                judge_name="t",
                                prompt_version="v1",
                                system="sys",
                                user=f"question {i}",
                                schema=Answer,
                                vote_number=1,
                                sleep=_no_sleep,
                                limiter=limiter,
                            )
                            for i in range(4)
                        )
                    )
                )
            finally:
                await client.close()

        answers = asyncio.run(go())
    assert [a.label for a in answers] == ["ok"] * 4
    assert limiter.narrowed >= 1
    # The retries after narrowing ran one at a time (the first wave overflowed together).
    assert max(barrier_hits) > 1
    assert barrier_hits[-3:] == [1, 1, 1]


def test_limiter_widens_again_after_successes() -> None:
    limiter = AdaptiveLimiter(3, widen_after=2)
    limiter.narrow()
    assert limiter.width == 1
    for _ in range(4):
        limiter.succeeded()
    assert limiter.width == 3
    limiter.succeeded()
    assert limiter.width == 3


def test_a_refused_request_fails_at_once_as_rejected() -> None:
    body = {"error": {"message": "model 'nope' not found", "type": "invalid_request_error"}}
    with FakeOpenAI(lambda _: (404, body)) as srv, pytest.raises(VoteFailed) as excinfo:
        _call(srv)
    assert len(srv.requests) == 1
    assert failures.kind_of(excinfo.value.reason) == failures.REJECTED
    assert "HTTP 404 model 'nope' not found" in excinfo.value.reason


def test_transient_failures_after_retries_are_tagged_transient() -> None:
    with (
        FakeOpenAI(lambda _: (503, {"error": {"message": "loading model"}})) as srv,
        pytest.raises(VoteFailed) as excinfo,
    ):
        _call(srv)
    assert len(srv.requests) == 3
    assert failures.kind_of(excinfo.value.reason) == failures.TRANSIENT


def _probe(handler: Any, temperature: float | None = None) -> tuple[ServerProfile, FakeOpenAI]:
    with FakeOpenAI(handler) as srv:

        async def go() -> ServerProfile:
            client = make_client(_config(srv))
            try:
                return await probe_server(client, model="m", temperature=temperature)
            finally:
                await client.close()

        return asyncio.run(go()), srv


def test_probe_keeps_json_schema_where_accepted() -> None:
    profile, srv = _probe(lambda _: completion('{"ok": true}'))
    assert profile.response_format == "json_schema"
    assert profile.token_param == "max_completion_tokens"
    assert len(srv.requests) == 1


def test_probe_falls_back_from_refused_options_one_by_one() -> None:
    def handler(body: dict[str, Any]) -> Any:
        if "max_completion_tokens" in body:
            return 400, {
                "error": {"message": "Unrecognized request argument: max_completion_tokens"}
            }
        if body.get("response_format", {}).get("type") == "json_schema":
            return 400, {"error": {"message": "response_format json_schema is not supported"}}
        if "temperature" in body:
            return 400, {"error": {"message": "Unsupported value: 'temperature'"}}
        return completion("{}")

    profile, _ = _probe(handler, temperature=0.3)
    assert profile.token_param == "max_tokens"
    assert profile.response_format == JSON_OBJECT
    assert profile.send_temperature is False
    assert profile.send_seed is True


def test_probe_ends_at_prompt_only_when_no_response_format_is_taken() -> None:
    def handler(body: dict[str, Any]) -> Any:
        if "response_format" in body:
            return 400, {"error": {"message": "response_format is not supported"}}
        return completion("{}")

    profile, _ = _probe(handler)
    assert profile.response_format == PROMPT_ONLY


def test_probe_keeps_defaults_when_the_server_is_down() -> None:
    profile, _ = _probe(lambda _: (503, {"error": {"message": "loading"}}))
    assert profile.response_format == "json_schema"
    assert any("inconclusive" in n for n in profile.notes)


def test_prompt_only_mode_sends_no_response_format_and_keys_the_cache_on_it() -> None:
    cache = MemoryJudgeCache()
    with FakeOpenAI(lambda _: completion('{"label": "a", "score": 1}')) as srv:
        schema_cfg = _config(srv)
        plain_cfg = _config(srv, profile=ServerProfile(response_format=PROMPT_ONLY))
        _call(srv, schema_cfg, cache=cache)
        _call(srv, plain_cfg, cache=cache)
        _call(srv, plain_cfg, cache=cache)  # cached under its own key: no third request
    assert len(srv.requests) == 2
    assert "response_format" not in srv.requests[1]
    assert '"score"' in srv.requests[1]["messages"][0]["content"]


def test_summary_groups_causes_and_says_what_to_do() -> None:
    reasons = [
        failures.tag(failures.CONTEXT, "BadRequestError: HTTP 400 too big (prompt 9 tokens)"),
        failures.tag(failures.CONTEXT, "BadRequestError: HTTP 400 too big (prompt 9 tokens)"),
        failures.tag(failures.TRANSIENT, "APITimeoutError: Request timed out."),
        "replay: no recorded results",
    ]
    causes = failures.summarize(reasons)
    assert [(c.kind, c.count) for c in causes] == [
        ("context", 2),
        ("other", 1),
        ("transient", 1),
    ]
    assert causes[0].resumable is False and causes[2].resumable is True
    text = failures.headline(causes, failed_items=3)
    assert "2 x BadRequestError" in text
    assert "llama-server -c" in text
