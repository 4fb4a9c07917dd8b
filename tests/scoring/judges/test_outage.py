"""Judge outages: ridden out behind a circuit breaker, then JudgeUnavailable (not a failed vote).

The real ``openai`` client talks to the local fake server, which answers 503 for a while.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.matching import match_repo
from scoring.audit.types import ScanItem, TruthItem
from scoring.judges import failures
from scoring.judges.consensus import VoteFailed, run_consensus
from scoring.judges.llm import (
    CallRecord,
    JudgeUnavailable,
    LLMConfig,
    make_client,
    structured_call,
)
from scoring.judges.outage import breaker_for
from scoring.probes.refusal_judge import OpenAIRefusalJudge
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

ANSWER = completion('{"label": "a", "score": 1}')


class Answer(BaseModel):
    label: str
    score: int


def _config(srv: FakeOpenAI, **overrides: Any) -> LLMConfig:
    base: dict[str, Any] = {
        "model": "m",
        "base_url": srv.base_url,
        "timeout_s": 5,
        "max_retries": 1,
        "backoff_base_s": 0.02,
        "backoff_max_s": 0.2,
        "breaker_threshold": 2,
    }
    return LLMConfig(**{**base, **overrides})


async def _ask(
    client: Any, config: LLMConfig, user: str, records: list[CallRecord] | None = None
) -> Answer:
    return await structured_call(
        client,
        config=config,
        judge_name="t",
        prompt_version="v1",
        system="sys",
        user=user,
        schema=Answer,
        vote_number=1,
        record=records.append if records is not None else None,
    )


def test_an_outage_shorter_than_the_patience_is_ridden_out_one_probe_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="scoring.judges.outage")
    with FakeOpenAI(lambda _: ANSWER) as srv:
        config = _config(srv, outage_patience_s=10)
        breaker = breaker_for(config.base_url, config.model)
        srv.fail_for(2.0, delay=0.05)

        async def go() -> list[Answer]:
            client = make_client(config)
            try:
                first = asyncio.ensure_future(_ask(client, config, "question 0"))
                # Two failures in a row open the breaker; max_retries=1 no longer ends the call.
                while not breaker.is_open:
                    assert not first.done(), "the call ended before the breaker opened"
                    await asyncio.sleep(0.01)
                srv.max_in_flight_down = 0
                others = [_ask(client, config, f"question {n}") for n in range(1, 6)]
                return [await first, *await asyncio.gather(*others)]
            finally:
                await client.close()

        answers = asyncio.run(go())
    assert answers == [Answer(label="a", score=1)] * 6
    # While open, only one probe at a time reached the server (each failure took 50 ms, so
    # two at once would have overlapped).
    assert srv.max_in_flight_down == 1
    assert len(srv.failed) >= 3
    assert not breaker.is_open
    warnings = [r.getMessage() for r in caplog.records if r.name == "scoring.judges.outage"]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"judge m at {srv.base_url} unreachable: ")
    assert "HTTP 503" in warnings[0] and "waiting up to 10 s" in warnings[0]
    assert warnings[1].startswith(f"judge m at {srv.base_url} answers again after ")


def _down_forever(srv: FakeOpenAI) -> None:
    srv.fail_for(3600)


def test_past_the_patience_the_call_raises_judge_unavailable_not_a_failed_vote() -> None:
    with FakeOpenAI(lambda _: ANSWER) as srv:
        _down_forever(srv)
        config = _config(srv, outage_patience_s=0.5)
        records: list[CallRecord] = []

        async def go() -> Answer:
            client = make_client(config)
            try:
                return await _ask(client, config, "q", records)
            finally:
                await client.close()

        with pytest.raises(JudgeUnavailable) as excinfo:
            asyncio.run(go())
    exc = excinfo.value
    assert not isinstance(exc, VoteFailed)
    assert (exc.model, exc.base_url) == ("m", srv.base_url)
    assert exc.waited_s >= 0.5
    assert "unreachable" in exc.reason and "HTTP 503" in exc.reason
    assert "\n" not in exc.reason
    # More attempts than max_retries allows a healthy judge, each on the ledger as an error.
    assert len(srv.requests) > 2
    assert [r.status for r in records] == ["error"] * len(srv.requests)
    assert not breaker_for(config.base_url, "m").is_open  # no call uses it any more


def test_run_consensus_lets_judge_unavailable_through_and_stops_the_other_vote() -> None:
    with FakeOpenAI(lambda _: ANSWER) as srv:
        _down_forever(srv)
        config = _config(srv, outage_patience_s=0.5)
        asked: list[int] = []

        async def go() -> Any:
            client = make_client(config)

            async def ask(n: int) -> Answer:
                asked.append(n)
                return await _ask(client, config, f"vote {n}")

            try:
                return await run_consensus(ask, lambda a: a.label, iterations=3)
            finally:
                await client.close()

        with pytest.raises(JudgeUnavailable):
            asyncio.run(go())
    # Not two failed votes and a third asked: the outage ended the consensus.
    assert asked == [1, 2]


def test_match_repo_lets_judge_unavailable_through() -> None:
    with FakeOpenAI(lambda _: ANSWER) as srv:
        _down_forever(srv)
        config = _config(srv, outage_patience_s=0.5)
        truths = [TruthItem(key=1, finding_id="H-1", title="Reentrancy in withdraw")]
        scans = [ScanItem(index=0, title="Reentrancy when withdrawing")]
        seen: list[Any] = []

        async def go() -> Any:
            judge = OpenAIAuditJudge(config=config)

            async def on_outcome(outcome: Any) -> None:
                seen.append(outcome)

            try:
                return await match_repo(judge, truths, scans, on_outcome=on_outcome)
            finally:
                await judge.aclose()

        with pytest.raises(JudgeUnavailable):
            asyncio.run(go())
    assert seen == []  # no judge-failed outcome was recorded for the truth finding


def test_bad_credentials_fail_the_vote_at_once_in_one_line() -> None:
    body = {"error": {"message": "Incorrect API key provided:\nsk-***", "type": "auth"}}
    with FakeOpenAI(lambda _: (401, body)) as srv:
        config = _config(srv, outage_patience_s=60, breaker_threshold=1)

        async def go() -> Answer:
            client = make_client(config)
            try:
                return await _ask(client, config, "q")
            finally:
                await client.close()

        with pytest.raises(VoteFailed) as excinfo:
            asyncio.run(go())
    assert len(srv.requests) == 1
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.REJECTED
    assert "HTTP 401 Incorrect API key provided" in reason and "\n" not in reason


def test_a_judge_that_answers_other_calls_is_healthy_and_max_retries_still_bounds_a_call() -> None:
    def handler(body: dict[str, Any]) -> Any:
        if "poison" in body["messages"][1]["content"]:
            time.sleep(0.1)  # other calls are answered while this one fails
            return 500, {"error": {"message": "internal error"}}
        return ANSWER

    with FakeOpenAI(handler) as srv:
        # Three failures in a row would open the breaker; answers in between keep it shut.
        config = _config(srv, outage_patience_s=60, breaker_threshold=2, max_retries=2)
        answered: list[Answer] = []

        async def go() -> Any:
            client = make_client(config)
            try:
                poison = asyncio.ensure_future(_ask(client, config, "poison"))
                n = 0
                while not poison.done():
                    answered.append(await _ask(client, config, f"fine {n}"))
                    n += 1
                return await asyncio.gather(poison, return_exceptions=True)
            finally:
                await client.close()

        (result,) = asyncio.run(go())
    poisoned = [r for r in srv.requests if "poison" in r["messages"][1]["content"]]
    assert isinstance(result, VoteFailed)
    assert failures.kind_of(result.reason) == failures.TRANSIENT
    assert len(poisoned) == 3
    assert answered and all(a == Answer(label="a", score=1) for a in answered)


def test_the_refusal_judge_lets_judge_unavailable_through() -> None:
    with FakeOpenAI(lambda _: ANSWER) as srv:
        _down_forever(srv)
        config = _config(srv, outage_patience_s=0.5)

        async def go() -> Any:
            judge = OpenAIRefusalJudge(client=make_client(config), config=config)
            try:
                pairs = [(f"prompt {n}", f"response {n}") for n in range(4)]
                return await judge.judge_many(pairs, concurrency=2)
            finally:
                await judge.aclose()

        with pytest.raises(JudgeUnavailable):
            asyncio.run(go())
