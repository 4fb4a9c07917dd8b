"""Ollama cuts a prompt over its context without any error (issue 24, item 4).

A fake Ollama answers every prompt, reporting as prompt tokens what it kept: at most its
context. The probe recognises Ollama (``/api/version``) and reads the context in use
(``/api/ps`` for the loaded model, else the model's ``num_ctx`` on ``/api/show``); a prompt it
cut fails as ``prompt_cut`` naming OLLAMA_CONTEXT_LENGTH and is never cached, while servers
that report small counts for every prompt (as the project's fakes do) are not taken for it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.judges import failures
from scoring.judges.cache import MemoryJudgeCache
from scoring.judges.llm import CallRecord, ContextOverflow, LLMConfig, make_client, structured_call
from scoring.judges.server import OLLAMA, ServerProfile, probe_server, prompt_cut
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


class Answer(BaseModel):
    label: str


def ollama_pages(
    *, ps_context: int | None = None, num_ctx: int | None = None, model: str = "m"
) -> dict[str, Any]:
    pages: dict[str, Any] = {"/api/version": {"version": "0.12.6"}}
    running: dict[str, Any] = {"name": f"{model}:latest", "model": f"{model}:latest"}
    if ps_context is not None:
        running["context_length"] = ps_context
    pages["/api/ps"] = {"models": [running]}
    parameters = f'stop "<|im_end|>"\nnum_ctx {num_ctx}' if num_ctx else 'stop "<|im_end|>"'
    pages["/api/show"] = {"parameters": parameters, "model_info": {"qwen2.context_length": 32768}}
    return pages


def ollama(context: int) -> Any:
    """Answers everything; the reported prompt tokens are what a context of ``context`` kept."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        sent = sum(len(m["content"]) for m in body["messages"]) // 4
        if len(body["messages"]) == 1:
            return completion(json.dumps({"ok": True}), tokens_in=min(sent, context))
        return completion(json.dumps({"label": "a"}), tokens_in=min(sent, context))

    return handler


def _probe(srv: FakeOpenAI) -> ServerProfile:
    async def go() -> ServerProfile:
        client = make_client(LLMConfig(model="m", base_url=srv.base_url))
        try:
            return await probe_server(client, model="m", temperature=None, base_url=srv.base_url)
        finally:
            await client.close()

    return asyncio.run(go())


def _ask(
    srv: FakeOpenAI,
    profile: ServerProfile,
    user: str,
    *,
    cache: MemoryJudgeCache | None = None,
    records: list[CallRecord] | None = None,
) -> Answer:
    config = LLMConfig(model="m", base_url=srv.base_url, timeout_s=5, max_retries=0)
    config.profile = profile

    async def go() -> Answer:
        client = make_client(config)
        try:
            return await structured_call(
                client,
                config=config,
                judge_name="t",
                prompt_version="v1",
                system="sys",
                user=user,
                schema=Answer,
                vote_number=1,
                cache=cache,
                record=(records if records is not None else []).append,
            )
        finally:
            await client.close()

    return asyncio.run(go())


def test_the_probe_knows_ollama_and_reads_the_loaded_models_context() -> None:
    with FakeOpenAI(ollama(2048), pages=ollama_pages(ps_context=2048, num_ctx=8192)) as srv:
        profile = _probe(srv)
    assert (profile.server, profile.context_tokens) == (OLLAMA, 2048)
    assert any("OLLAMA_CONTEXT_LENGTH" in n and "2048 tokens" in n for n in profile.notes)


def test_the_probe_reads_num_ctx_where_ollama_does_not_list_the_context() -> None:
    with FakeOpenAI(ollama(4096), pages=ollama_pages(num_ctx=4096)) as srv:
        profile = _probe(srv)
    assert (profile.server, profile.context_tokens) == (OLLAMA, 4096)
    # Only the probe's own question reached the chat endpoint.
    assert len(srv.requests) == 1


def test_a_prompt_ollama_cut_fails_as_prompt_cut_and_is_never_cached() -> None:
    cache = MemoryJudgeCache()
    records: list[CallRecord] = []
    with FakeOpenAI(ollama(2048), pages=ollama_pages(ps_context=2048)) as srv:
        profile = _probe(srv)
        assert _ask(srv, profile, "short question", cache=cache) == Answer(label="a")
        with pytest.raises(ContextOverflow) as excinfo:
            _ask(srv, profile, "word " * 8000, cache=cache, records=records)
    reason = excinfo.value.reason
    assert failures.kind_of(reason) == failures.PROMPT_CUT
    assert "Ollama at " + srv.base_url in reason and "OLLAMA_CONTEXT_LENGTH" in reason
    assert "kept 2,048 prompt tokens of about 10,00" in reason
    # What the caller needs to split its batch or cut its paper to fit.
    assert excinfo.value.detail.context_tokens == 2048
    assert (excinfo.value.detail.prompt_tokens or 0) >= 10_000
    assert [r.status for r in records] == ["error"] and records[0].tokens_in == 2048
    assert len(cache.entries) == 1  # only the short question's answer
    assert "num_ctx" in failures.ADVICE[failures.PROMPT_CUT]


def test_ollama_without_a_published_context_is_caught_by_the_short_count() -> None:
    with FakeOpenAI(ollama(4096), pages=ollama_pages()) as srv:
        profile = _probe(srv)
        assert profile.server == OLLAMA and profile.context_tokens is None
        # A prompt under the context: its count matches the estimate, nothing to say.
        assert _ask(srv, profile, "word " * 2500) == Answer(label="a")
        with pytest.raises(ContextOverflow) as excinfo:
            _ask(srv, profile, "word " * 8000)
    assert failures.kind_of(excinfo.value.reason) == failures.PROMPT_CUT
    assert excinfo.value.detail.context_tokens == 4096


def test_servers_that_report_small_counts_are_not_taken_for_a_cut() -> None:
    # The project's fakes (and a server counting a cached prefix) report 11 prompt tokens for
    # every prompt: without Ollama's word or a known context that was filled, nothing is cut.
    for profile in (
        ServerProfile(),
        ServerProfile(context_tokens=4096, server="llama.cpp"),
        ServerProfile(server=OLLAMA),  # under the floor: no context is that small
    ):
        assert prompt_cut(profile, estimated=20_000, reported=11) is None
    # A known context filled to the brim was cut, whatever the server.
    cut = prompt_cut(ServerProfile(context_tokens=4096), estimated=3900, reported=4096)
    assert cut is not None and cut.context_tokens == 4096 and cut.prompt_tokens == 4096
    # Ollama reporting about what was estimated: the prompt fitted.
    assert prompt_cut(ServerProfile(server=OLLAMA), estimated=3000, reported=2600) is None
