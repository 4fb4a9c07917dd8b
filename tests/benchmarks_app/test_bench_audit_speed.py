"""The audit speed benches' fake judge parses each prompt as a server does (issue 38): it costs
CPU per call, and reports the prompt tokens and those a prefix cache would have served."""

from __future__ import annotations

import json
import math
import time
import urllib.request

from benchmarks_app.bench.recorded_judge import PromptParser, RecordedJudgeServer
from scoring.audit.judges import PROMPT_V1, prompt_for
from scoring.audit.types import ScanItem, TruthItem

BATCH = [
    ScanItem(index=i, title=f"Finding {i}", description=f"The withdraw path {i} " * 30)
    for i in range(4)
]
TRUTHS = [
    TruthItem(key=n, finding_id=f"H-{n}", title=f"Truth {n}", description="Funds drained " * 5)
    for n in range(3)
]


def _messages(version: str, truth: TruthItem) -> list[dict[str, str]]:
    prompt = prompt_for(version)
    return [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": prompt.build(truth, BATCH)},
    ]


def test_the_parser_counts_the_prefix_a_cache_would_serve() -> None:
    parser = PromptParser()
    first_tokens, first_cached = parser.parse(_messages("audit-match-v2", TRUTHS[0]))
    assert first_tokens > 500 and first_cached == 0
    tokens, cached = parser.parse(_messages("audit-match-v2", TRUTHS[1]))
    # Everything up to the verified finding's title is the batch's shared prefix.
    assert 0.8 * tokens < cached < tokens
    # The same question again (another vote) is served whole.
    assert parser.parse(_messages("audit-match-v2", TRUTHS[1])) == (tokens, tokens)
    assert parser.prompt_tokens == first_tokens + 2 * tokens
    assert parser.cached_tokens == cached + tokens


def test_the_old_layout_shares_little_more_than_the_system_prompt() -> None:
    parser = PromptParser()
    parser.parse(_messages(PROMPT_V1, TRUTHS[0]))
    tokens, cached = parser.parse(_messages(PROMPT_V1, TRUTHS[1]))
    assert cached < 0.4 * tokens


def test_the_fake_reports_what_it_parsed_as_a_server_does() -> None:
    server = RecordedJudgeServer([])
    try:
        for truth in TRUTHS[:2]:
            answer = server.answer({"model": "m", "messages": _messages("audit-match-v2", truth)})
        usage = answer["usage"]
        assert usage["prompt_tokens"] > 500
        assert usage["prompt_tokens_details"]["cached_tokens"] > 0.8 * usage["prompt_tokens"]
        assert server.parser.cached_share > 0.4
    finally:
        server.server.server_close()


def test_the_fake_times_the_judging_span_and_its_parsing_cpu() -> None:
    """What ``audit_paths`` prints beside the wall time: the first request to the last answer
    (start-up and wrap-up left out), and the CPU the fake spent parsing."""
    body = json.dumps({"model": "m", "messages": _messages("audit-match-v2", TRUTHS[0])})

    def ask(url: str) -> None:
        request = urllib.request.Request(
            f"{url}/chat/completions", body.encode(), {"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read())["choices"][0]["message"]["content"]

    with RecordedJudgeServer([], latency_s=0.05) as server:
        assert math.isnan(server.judging_s)
        ask(server.base_url)
        time.sleep(0.1)
        ask(server.base_url)
        assert 0.2 <= server.judging_s < 5  # two answers of 0.05 s with 0.1 s between
        server.span_reset()
        ask(server.base_url)
        assert 0.05 <= server.judging_s < 0.2
    assert server.calls == 3 and server.parser.parsed == 3
    assert server.parser.cpu_ms_per_prompt > 0
