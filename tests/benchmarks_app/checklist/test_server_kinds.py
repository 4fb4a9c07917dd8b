# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""A checklist run on what real servers do at their limits (issue 24, item 4), end to end.

Each fake behaves like one server: vLLM refuses prompt + ``max_tokens`` over its
``max_model_len`` (the run sizes the bound from ``/v1/models``); a reasoning model spends its
whole bound thinking (the run fails as ``reasoning``, not as invalid answers); Ollama keeps
only its context of a long prompt, silently (the run notices from the reported prompt
tokens, cuts the paper to fit and says which setting to raise).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import JudgeCall, RunStatus
from benchmarks_app.selectors.runs import run_failure_causes
from benchmarks_app.services.checklist import checklist_submission_assess
from scoring.judges import failures
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.scoring.judges.fake_openai import Events, FakeOpenAI, chunk, completion
from tests.scoring.judges.test_ollama import ollama_pages

pytestmark = pytest.mark.django_db

VERDICT = json.dumps({"correct": True, "feedback": "The paper supports the answer."})


def _paper(chars: int) -> Any:
    m = MembershipFactory()
    sentence = "We evaluate the method on three datasets and report the results. "
    text = "1 Introduction\n" + sentence * (chars // len(sentence))
    paper = PaperFactory(submission__team=m.team, extracted_text=text)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    return paper


def _tokens(body: dict[str, Any]) -> int:
    return sum(len(m["content"]) for m in body["messages"]) // 4


def _assess(paper: Any, server: FakeOpenAI, capture: Any, **overrides: Any) -> Any:
    with (
        override_settings(OPENAI_BASE_URL=server.base_url, JUDGE_PROBE=True, **overrides),
        capture(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    return run


def test_vllm_max_model_len_sizes_the_bound_so_no_request_is_refused(
    django_capture_on_commit_callbacks: Any,
) -> None:
    length = 8192

    def vllm(body: dict[str, Any]) -> Any:
        asked = _tokens(body) + body["max_completion_tokens"]
        if asked > length:
            message = (
                f"This model's maximum context length is {length} tokens. However, you "
                f"requested {asked} tokens ({_tokens(body)} in the messages, "
                f"{body['max_completion_tokens']} in the completion)."
            )
            return 400, {"object": "error", "message": message, "type": "BadRequestError"}
        if len(body["messages"]) == 1:
            return completion('{"ok": true}')
        return completion(VERDICT, tokens_in=_tokens(body))

    models = {"object": "list", "data": [{"id": "m1", "max_model_len": length}]}
    paper = _paper(20_000)  # about 5,500 tokens with the question: 4,096 more do not fit
    with FakeOpenAI(vllm, pages={"/v1/models": models}) as server:
        run = _assess(paper, server, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.SUCCEEDED, run.error
    asked = [r for r in server.requests if len(r["messages"]) == 2]
    assert len(asked) >= 15
    assert all(_tokens(r) + r["max_completion_tokens"] <= length for r in asked)
    assert all(r["max_completion_tokens"] < 4096 for r in asked)
    probe = run.judge_config["request"]["probe"]
    assert (probe["context_tokens"], probe["server"]) == (length, "vllm")
    assert not JudgeCall.objects.filter(run=run).exclude(status="ok").exists()


def test_a_reasoning_model_that_thinks_through_its_bound_fails_as_reasoning(
    django_capture_on_commit_callbacks: Any,
) -> None:
    usage = {
        "prompt_tokens": 900,
        "completion_tokens": 64,
        "completion_tokens_details": {"reasoning_tokens": 64},
    }

    def thinker(body: dict[str, Any]) -> Events:
        if len(body["messages"]) == 1:
            return Events(
                [
                    chunk(reasoning="The user wants JSON."),
                    chunk('{"ok": true}', finish_reason="stop", usage=usage),
                ]
            )
        thoughts = chunk(reasoning="Let me weigh the paper. " * 4)
        last = chunk(reasoning="Hmm", usage=usage, finish_reason="length")
        return Events([thoughts, last])

    paper = _paper(2_000)
    with FakeOpenAI(thinker) as server:
        run = _assess(paper, server, django_capture_on_commit_callbacks, JUDGE_MAX_ANSWER_TOKENS=64)
    assert run.status == RunStatus.FAILED and run.failed_items == 15
    causes = run_failure_causes(run=run)
    assert [(c.kind, c.count) for c in causes] == [(failures.REASONING, 15)]
    assert "all 64 tokens of the bound spent reasoning" in causes[0].message
    assert "JUDGE_MAX_ANSWER_TOKENS" in causes[0].advice and "invalid" not in run.error.lower()
    assert run.judge_config["request"]["probe"]["reasoning"] is True
    calls = JudgeCall.objects.filter(run=run)
    assert set(calls.values_list("status", flat=True)) == {"truncated"}
    assert set(calls.values_list("tokens_reasoning", flat=True)) == {64}


def test_ollama_cutting_a_long_paper_is_noticed_and_the_paper_cut_to_fit(
    django_capture_on_commit_callbacks: Any,
) -> None:
    context = 4096

    def ollama(body: dict[str, Any]) -> Any:
        kept = min(_tokens(body), context)
        answer = '{"ok": true}' if len(body["messages"]) == 1 else VERDICT
        return completion(answer, tokens_in=kept)

    paper = _paper(40_000)  # about 10,000 tokens: Ollama would keep 4,096 of them
    pages = ollama_pages(ps_context=context, model="m1")
    with FakeOpenAI(ollama, pages=pages) as server:
        run = _assess(
            paper, server, django_capture_on_commit_callbacks, JUDGE_MAX_ANSWER_TOKENS=512
        )
    assert run.status == RunStatus.SUCCEEDED, run.error
    probe = run.judge_config["request"]["probe"]
    assert (probe["server"], probe["context_tokens"]) == ("ollama", context)
    cut = JudgeCall.objects.filter(run=run, status="error")
    assert cut.count() >= 15
    assert all("cut the prompt to its context" in c.error for c in cut)
    # Each question was asked again over the part of the paper that fits.
    answered = [r for r in server.requests if len(r["messages"]) == 2 and _tokens(r) < context]
    assert len(answered) >= 15
    assert JudgeCall.objects.filter(run=run, status="ok").count() >= 15


def test_ollama_whose_context_cannot_hold_the_question_says_what_to_raise(
    django_capture_on_commit_callbacks: Any,
) -> None:
    context = 1024

    def ollama(body: dict[str, Any]) -> Any:
        answer = '{"ok": true}' if len(body["messages"]) == 1 else VERDICT
        return completion(answer, tokens_in=min(_tokens(body), context))

    paper = _paper(40_000)
    with FakeOpenAI(ollama, pages=ollama_pages(ps_context=context, model="m1")) as server:
        run = _assess(paper, server, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.FAILED and run.failed_items == 15
    causes = run_failure_causes(run=run)
    assert [c.kind for c in causes] == [failures.PROMPT_CUT]
    assert "OLLAMA_CONTEXT_LENGTH" in causes[0].message and not causes[0].resumable
    assert "OLLAMA_CONTEXT_LENGTH" in run.error
