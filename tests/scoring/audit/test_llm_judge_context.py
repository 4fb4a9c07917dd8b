"""The openai audit judge splits a batch that does not fit the server's context (issue 17)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from scoring.audit.judges.llm import OpenAIAuditJudge, best_of
from scoring.audit.types import ScanItem, TruthItem, neither
from scoring.judges import failures
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import LLMConfig
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, context_overflow

TRUTH = TruthItem(key="H-1", finding_id="H-1", title="Reentrancy in withdraw", severity="High")
BATCH = [ScanItem(index=i, title=f"finding {i}", description="x" * 50) for i in range(8)]


def _too_big(n_findings: int) -> tuple[int, dict[str, Any]]:
    return context_overflow(1000 * n_findings, 2500)


def _server(match_index: int | None, fits: int) -> FakeOpenAI:
    def handler(body: dict[str, Any]) -> Any:
        user = body["messages"][1]["content"]
        indices = [int(i) for i in re.findall(r'<finding index="(\d+)">', user)]
        if len(indices) > fits:
            return _too_big(len(indices))
        hit = match_index if match_index in indices else -1
        return completion(
            json.dumps(
                {
                    "is_match": hit != -1,
                    "is_partial_match": False,
                    "explanation": "same root cause" if hit != -1 else "nothing",
                    "severity_from_junior_auditor": "High" if hit != -1 else "N/A",
                    "severity_from_truth": "High",
                    "index_of_finding_from_junior_auditor": hit,
                }
            )
        )

    return FakeOpenAI(handler)


def _judge(server: FakeOpenAI, batch: list[ScanItem]) -> tuple[Any, OpenAIAuditJudge]:
    config = LLMConfig(model="m", base_url=server.base_url, max_retries=0, timeout_s=5)
    judge = OpenAIAuditJudge(config=config, concurrency=2)

    async def go() -> Any:
        try:
            return await judge.judge(TRUTH, batch, vote_number=1)
        finally:
            await judge.aclose()

    return asyncio.run(go()), judge


def test_a_batch_too_large_for_the_context_is_split_until_it_fits() -> None:
    with _server(match_index=6, fits=2) as srv:
        verdict, judge = _judge(srv, BATCH)
    assert verdict.is_match and verdict.index_of_finding_from_junior_auditor == 6
    # 8 -> 4+4 -> 2+2+2+2: one refused request per split, then four that fit.
    assert judge.splits == 3
    asked = [len(re.findall(r"<finding index=", r["messages"][1]["content"])) for r in srv.requests]
    assert sorted(asked) == [2, 2, 2, 2, 4, 4, 8]


def test_split_answers_no_match_when_no_part_matches() -> None:
    with _server(match_index=None, fits=4) as srv:
        verdict, _ = _judge(srv, BATCH)
    assert not verdict.is_match and verdict.index_of_finding_from_junior_auditor == -1


def test_one_finding_that_does_not_fit_fails_the_vote_naming_what_to_change() -> None:
    with _server(match_index=0, fits=0) as srv, pytest.raises(VoteFailed) as excinfo:
        _judge(srv, BATCH[:1])
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.CONTEXT
    assert "prompt 1,000 tokens, context 2,500" in reason
    assert "even one scan finding does not fit" in reason
    (cause,) = failures.summarize([reason])
    assert "JUDGE_MAX_ANSWER_TOKENS" in cause.advice and not cause.resumable


def test_best_of_prefers_match_then_partial_then_the_first() -> None:
    partial = neither().model_copy(
        update={"is_partial_match": True, "index_of_finding_from_junior_auditor": 3}
    )
    match = neither().model_copy(
        update={"is_match": True, "index_of_finding_from_junior_auditor": 5}
    )
    first_none = neither("first")
    assert best_of([first_none, partial, match]) is match
    assert best_of([first_none, partial]) is partial
    assert best_of([first_none, neither("second")]) is first_none


def test_a_batch_ollama_cut_silently_is_split_as_if_it_had_said_so() -> None:
    from scoring.judges.server import OLLAMA, ServerProfile

    long_batch = [
        ScanItem(index=i, title=f"finding {i}", description="word " * 700) for i in range(8)
    ]
    context = 2048

    def ollama(body: dict[str, Any]) -> Any:
        # Ollama answers every prompt; it only reports keeping at most its context.
        sent = sum(len(m["content"]) for m in body["messages"]) // 4
        user = body["messages"][1]["content"]
        indices = [int(i) for i in re.findall(r'<finding index="(\d+)">', user)]
        hit = 5 if 5 in indices and sent <= context else -1
        verdict = {
            "is_match": hit != -1,
            "is_partial_match": False,
            "explanation": "x",
            "severity_from_junior_auditor": "High",
            "severity_from_truth": "High",
            "index_of_finding_from_junior_auditor": hit,
        }
        return completion(json.dumps(verdict), tokens_in=min(sent, context))

    with FakeOpenAI(ollama) as srv:
        config = LLMConfig(model="m", base_url=srv.base_url, max_retries=0, timeout_s=5)
        config.profile = ServerProfile(server=OLLAMA, context_tokens=context)
        judge = OpenAIAuditJudge(config=config, concurrency=2)

        async def go() -> Any:
            try:
                return await judge.judge(TRUTH, long_batch, vote_number=1)
            finally:
                await judge.aclose()

        verdict = asyncio.run(go())
    # Each finding is about 900 tokens: with the instructions, only a batch of one fits 2,048
    # (8 -> 4+4 -> 2+2+2+2 -> 1 x 8); the answers given on cut prompts were not taken.
    assert verdict.is_match and verdict.index_of_finding_from_junior_auditor == 5
    assert judge.splits == 1 + 2 + 4
