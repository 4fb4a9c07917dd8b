"""Asking one question through the judge layer the way a run does (``async_to_sync``)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from pydantic import BaseModel

from scoring.judges.llm import LLMConfig, make_client, structured_call
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


class Answer(BaseModel):
    label: str
    score: int


QUESTION: dict[str, Any] = {
    "judge_name": "ledger-test",
    "prompt_version": "v1",
    "system": "sys",
    "user": "is this a question?",
    "schema": Answer,
    "vote_number": 1,
}


def config_for(srv: FakeOpenAI, **overrides: Any) -> LLMConfig:
    base: dict[str, Any] = {"model": "m", "base_url": srv.base_url, "timeout_s": 5}
    return LLMConfig(**{**base, "max_retries": 0, **overrides})


def ask(srv: FakeOpenAI, *, cache: Any, record: Any, **question: Any) -> Answer:
    """One question, asked inside an event loop driven by ``async_to_sync`` as processors do."""
    config = question.pop("config", None) or config_for(srv)

    async def go() -> Answer:
        client = make_client(config)
        try:
            return await structured_call(
                client,
                config=config,
                cache=cache,
                record=record,
                **{**QUESTION, **question},
            )
        finally:
            await client.close()

    return async_to_sync(go)()


def judge_or_probe(body: dict[str, Any]) -> dict[str, Any]:
    """The audit verdicts of ``fake_verdict``; the one-message probe gets its JSON object."""
    if len(body["messages"]) == 1:
        return completion(json.dumps({"ok": True}), tokens_in=5, tokens_out=4)
    return fake_verdict(body)
