"""The process-wide call gate: width across loops, priority, rate limit, 429 and retry-after."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.types import AuditVerdict
from scoring.judges.limits import CALL_PRIORITY, CallGate, gate_for, retry_after_s
from scoring.judges.llm import LLMConfig, MemoryJudgeCache, structured_call
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body


def test_width_holds_across_event_loops_in_threads() -> None:
    gate = CallGate(3)
    peak = {"now": 0, "max": 0}
    lock = threading.Lock()

    async def one() -> None:
        async with gate.slot():
            with lock:
                peak["now"] += 1
                peak["max"] = max(peak["max"], peak["now"])
            await asyncio.sleep(0.02)
            with lock:
                peak["now"] -= 1

    def loop_of_calls() -> None:
        async def many() -> None:
            await asyncio.gather(*(one() for _ in range(6)))

        asyncio.run(many())

    threads = [threading.Thread(target=loop_of_calls) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak["max"] == 3
    assert gate.in_flight == 0


def test_queued_calls_go_highest_priority_first() -> None:
    gate = CallGate(1)
    order: list[float] = []

    async def one(priority: float) -> None:
        CALL_PRIORITY.set(priority)
        async with gate.slot():
            order.append(priority)

    async def go() -> None:
        holder = await gate.acquire()
        waiting = [asyncio.ensure_future(one(p)) for p in (1.0, 5.0, 3.0, 2.0)]
        for _ in range(5):
            await asyncio.sleep(0)  # every waiter queues behind the held slot
        assert order == []
        gate.release(holder)
        await asyncio.gather(*waiting)

    asyncio.run(go())
    assert order == [5.0, 3.0, 2.0, 1.0]


def test_requests_per_minute_are_held_to_the_limit() -> None:
    now = [0.0]
    gate = CallGate(10, rpm=2, clock=lambda: now[0])

    async def go() -> list[str]:
        seen = []
        for _ in range(2):
            async with gate.slot():
                seen.append("in")
        third = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0.05)
        seen.append("third waits" if not third.done() else "third ran")
        third.cancel()
        return seen

    assert asyncio.run(go()) == ["in", "in", "third waits"]
    assert gate._rate_wait(0, now[0]) == 60.0
    now[0] = 61.0
    assert gate._rate_wait(0, now[0]) == 0.0


def test_tokens_per_minute_count_against_the_window() -> None:
    gate = CallGate(10, tpm=1000, clock=lambda: 0.0)
    assert gate._rate_wait(600, 0.0) == 0.0
    gate._window.append([0.0, 600.0])
    assert gate._rate_wait(600, 0.0) == 60.0
    assert gate._rate_wait(300, 0.0) == 0.0


def test_429_pauses_everyone_and_lowers_the_rate() -> None:
    now = [100.0]
    gate = CallGate(10, rpm=100, clock=lambda: now[0])
    for _ in range(10):
        gate._window.append([now[0], 0.0])
    gate.throttled(7.0)
    assert gate.rpm_now == 8  # 80% of what the last minute carried
    assert gate._rate_wait(0, now[0]) == 7.0
    for _ in range(gate.recover_after):
        gate.succeeded()
    assert gate.rpm_now > 8


def test_retry_after_headers_are_read() -> None:
    def exc(headers: dict[str, str]) -> SimpleNamespace:
        return SimpleNamespace(response=SimpleNamespace(headers=headers))

    assert retry_after_s(exc({"retry-after": "3"})) == 3.0  # type: ignore[arg-type]
    assert retry_after_s(exc({"retry-after-ms": "1500"})) == 1.5  # type: ignore[arg-type]
    assert retry_after_s(exc({})) is None  # type: ignore[arg-type]


def test_one_gate_per_endpoint_for_every_judge_of_the_process() -> None:
    config = LLMConfig(model="m", api_key="k", base_url="http://127.0.0.1:9/v1")
    a = OpenAIAuditJudge(config=config, concurrency=5)
    b = OpenAIAuditJudge(config=config, concurrency=5)
    assert a.limiter is b.limiter
    assert a.limiter is gate_for("http://127.0.0.1:9/v1", "m", width=5)


def test_a_429_is_retried_and_tightens_the_gate() -> None:
    answers = iter([(429, error_body("slow down"))])
    good = AuditVerdict(
        is_match=False,
        is_partial_match=False,
        explanation="none",
        severity_from_junior_auditor="N/A",
        severity_from_truth="N/A",
        index_of_finding_from_junior_auditor=-1,
    ).model_dump_json()

    def handler(body: dict[str, Any]) -> Any:
        return next(answers, completion(good))

    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    with FakeOpenAI(handler) as server:
        config = LLMConfig(
            model="m", api_key="k", base_url=server.base_url, backoff_base_s=0.01, max_retries=2
        )
        gate = CallGate(4)

        async def go() -> AuditVerdict:
            from scoring.judges.llm import make_client

            client = make_client(config)
            try:
                return await structured_call(
                    client,
                    config=config,
                    judge_name="t",
                    prompt_version="v",
                    system="s",
                    user="u",
                    schema=AuditVerdict,
                    vote_number=1,
                    cache=MemoryJudgeCache(),
                    sleep=sleep,
                    limiter=gate,
                )
            finally:
                await client.close()

        verdict = asyncio.run(go())
    assert verdict.explanation == "none"
    assert gate.throttles == 1
    assert len(server.requests) == 2
    assert len(slept) == 1
