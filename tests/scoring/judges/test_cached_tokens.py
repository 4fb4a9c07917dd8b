"""Prompt tokens a server read from its cache: read from every server's usage into the ledger
record, and billed at the cached price (issue 38)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scoring.judges.llm import CallRecord
from scoring.judges.reply import read_body
from scoring.judges.usage import CACHED_INPUT_SHARE, JudgeUsage, judge_usage
from tests.scoring.judges.fake_openai import Events, FakeOpenAI, chunk, completion
from tests.scoring.judges.test_server_faults import Answer, _call

ANSWER = json.dumps({"label": "yes"})


def _openai_body(cached: int) -> dict[str, Any]:
    # OpenAI, vLLM and SGLang.
    body = completion(ANSWER, tokens_in=1000, tokens_out=20)
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return body


def _llama_body(cache_n: int) -> dict[str, Any]:
    # llama.cpp: its timings say how many prompt tokens the slot kept (cache_n).
    body = completion(ANSWER, tokens_in=1000, tokens_out=20)
    body["timings"] = {"cache_n": cache_n, "prompt_n": 1000 - cache_n, "predicted_n": 20}
    return body


@pytest.mark.parametrize(
    ("body", "cached"),
    [
        (_openai_body(768), 768),
        (_llama_body(900), 900),
        ({**completion(ANSWER, tokens_in=1000), "tokens_cached": 640}, 640),
        (completion(ANSWER, tokens_in=1000), 0),
        # A server that claims more cached tokens than the prompt had is held to the prompt.
        (_openai_body(5000), 1000),
        ({**_openai_body(10), "timings": {"cache_n": "lots"}}, 10),
    ],
    ids=["openai", "llama.cpp timings", "tokens_cached", "none", "capped", "garbled"],
)
def test_cached_prompt_tokens_are_read_from_each_server(body: dict[str, Any], cached: int) -> None:
    reply = read_body(json.dumps(body), content_type="application/json", base_url=None)
    assert (reply.tokens_in, reply.tokens_cached) == (1000, cached)


@pytest.mark.parametrize("server", ["openai", "llama.cpp"])
def test_a_streamed_answer_ledgers_its_cached_tokens(server: str) -> None:
    usage: dict[str, Any] = {"prompt_tokens": 4000, "completion_tokens": 12}
    last: dict[str, Any] = {"id": "x", "choices": [], "usage": usage}
    if server == "openai":
        usage["prompt_tokens_details"] = {"cached_tokens": 3584}
    else:
        last["timings"] = {"cache_n": 3584, "prompt_n": 416, "predicted_per_second": 20.0}
    events = [chunk('{"label"'), chunk(': "yes"}', finish_reason="stop"), last]
    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: Events(events)) as srv:
        assert _call(srv, records=records) == Answer(label="yes")
    assert [(r.status, r.tokens_in, r.tokens_cached) for r in records] == [("ok", 4000, 3584)]


def test_a_whole_body_answer_ledgers_its_cached_tokens() -> None:
    records: list[CallRecord] = []
    with FakeOpenAI(lambda _: _openai_body(768)) as srv:
        _call(srv, records=records, stream=False)
    assert [(r.status, r.tokens_cached) for r in records] == [("ok", 768)]


def _usage(**prices: Any) -> JudgeUsage:
    return judge_usage(
        calls_new=10,
        calls_cached=0,
        tokens_in=1_000_000,
        tokens_out=100_000,
        tokens_reasoning=0,
        tokens_cached=800_000,
        latencies_ms=[100.0],
        **prices,
    )


def test_cached_input_is_billed_at_the_cached_price() -> None:
    usage = _usage(price_in_per_mtok=2.0, price_out_per_mtok=8.0, price_cached_in_per_mtok=0.5)
    # 200k uncached at $2, 800k cached at $0.50, 100k out at $8.
    assert usage.cost_estimate == pytest.approx(0.4 + 0.4 + 0.8)
    assert usage.cached_share == 0.8
    assert "1,000,000 in (800,000 cached)" in usage.line()


def test_cached_price_unset_is_a_share_of_the_input_price() -> None:
    usage = _usage(price_in_per_mtok=2.0, price_out_per_mtok=8.0)
    assert usage.cost_estimate == pytest.approx(0.4 + 0.8 * 2.0 * CACHED_INPUT_SHARE + 0.8)
    # Without prices there is no cost, cached tokens or not.
    assert _usage().cost_estimate is None


def test_usage_survives_its_dict() -> None:
    usage = _usage(price_in_per_mtok=1.0)
    data = usage.as_dict()
    assert data["tokens_cached"] == 800_000 and data["cached_share"] == 0.8
    assert JudgeUsage.from_dict(data) == usage
