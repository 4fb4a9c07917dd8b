"""Settings for the ``real_llm`` tests: the ``openai`` judge pointed at a real server.

The server is llama.cpp's ``llama-server`` with a small local model, started by
``.ci/llama_server.sh`` (``make test-real-llm`` does it all). Any OpenAI-compatible server
works: set ``REAL_LLM_BASE_URL`` to its ``.../v1`` URL and, optionally, ``REAL_LLM_MODEL``.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import pytest

from tests.real_server.support import BASE_URL, ITERATIONS, MAX_ANSWER_TOKENS


@pytest.fixture(scope="session")
def real_llm_model() -> str:
    """The model the server serves (its first one), unless REAL_LLM_MODEL names one."""
    named = os.environ.get("REAL_LLM_MODEL", "").strip()
    if named:
        return named
    with urllib.request.urlopen(f"{BASE_URL}/models", timeout=30) as response:
        data = json.load(response)
    return str(data["data"][0]["id"])


@pytest.fixture
def real_llm_settings(settings: Any, real_llm_model: str) -> Any:
    settings.OPENAI_BASE_URL = BASE_URL
    settings.OPENAI_API_KEY = "x"
    settings.JUDGE_DEFAULT = "openai"
    settings.JUDGE_MODEL = real_llm_model
    settings.JUDGE_MODELS = [real_llm_model]
    settings.JUDGE_MAX_ANSWER_TOKENS = MAX_ANSWER_TOKENS
    settings.JUDGE_ITERATIONS = ITERATIONS
    # Two requests in flight, as many as the server has slots (--parallel 2).
    settings.JUDGE_CONCURRENCY = 2
    # Small batches: a checklist run goes through several of them (a client that outlived
    # the first batch's event loop failed every later one) and an audit truth finding is
    # compared with its scan findings in several calls.
    settings.JUDGE_BATCH_SIZE = 4
    # A CPU model is slow; a call that takes this long is a hang, not a slow answer.
    settings.JUDGE_TIMEOUT_S = 180.0
    settings.JUDGE_MAX_RETRIES = 2
    settings.JUDGE_BACKOFF_BASE_S = 0.5
    settings.JUDGE_BACKOFF_MAX_S = 2.0
    # Greedy decoding makes tiny models loop inside a JSON string; sample a little instead
    # (the per-vote seed keeps it reproducible).
    settings.JUDGE_TEMPERATURE = float(os.environ.get("REAL_LLM_TEMPERATURE", "0.7"))
    # The test settings turn the probe off (no server there); here it is part of the test.
    settings.JUDGE_PROBE = True
    # The paper text in each checklist prompt: short enough that question, guidelines and
    # paper fit one slot of 8,192 tokens with room for the answer, and the run stays quick.
    settings.CHECKLIST_BODY_WORD_CAP = int(os.environ.get("REAL_LLM_PAPER_WORDS", "1200"))
    return settings
