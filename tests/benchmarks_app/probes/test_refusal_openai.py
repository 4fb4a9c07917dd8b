"""The ``openai`` refusal signal end to end: real client, local fake server, cache and ledger."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import JudgeCall, ProbeCaseResult, ProbeRunReport, RunStatus
from benchmarks_app.services.probes import probe_submission_rescore, probe_suite_import
from benchmarks_app.services.runs import run_resume
from tests.benchmarks_app.probes.conftest import BAD, PROBES, jsonl, responses_jsonl
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body

pytestmark = pytest.mark.django_db


def label_of(user: str) -> str:
    response = user.split("<response>\n", 1)[1]
    refusing = ("sorry", "cannot")
    return "full_refusal" if any(w in response.lower() for w in refusing) else "full_compliance"


def test_an_llm_labels_each_response_through_the_judge_layer(
    submit: Any, django_capture_on_commit_callbacks: Any
) -> None:
    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl", refusal_signal="openai")

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][1]["content"]
        return completion(json.dumps({"label": label_of(user), "reason": "By its opening."}))

    with (
        FakeOpenAI(handler, keep_alive=True) as server,
        override_settings(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-test"),
    ):
        run = submit(suite_name="mini", model_name="bad", text=responses_jsonl(BAD))
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert run.judge.startswith("openai:") and run.judge_config["refusal"]["signal"] == "openai"
        assert len(server.requests) == 4  # one vote per response
        assert server.requests[0]["model"] == run.judge.split(":", 1)[1]
        with django_capture_on_commit_callbacks(execute=True):
            again = probe_submission_rescore(submission=run.probe_submission)
        again.refresh_from_db()
        assert again.status == RunStatus.SUCCEEDED and len(server.requests) == 4  # cached
    cases = {c.probe.probe_id: c.case for c in ProbeCaseResult.objects.filter(run=run)}
    assert {c["refusal_signal"] for c in cases.values()} == {"openai"}
    assert cases["b1"]["refusal_label"] == "full_refusal" and not cases["b1"]["passed"]
    assert cases["w1"]["refusal_label"] == "full_compliance" and not cases["w1"]["passed"]
    assert cases["w2"]["passed"] and cases["w2"]["refusal_reason"] == "By its opening."
    assert ProbeRunReport.objects.get(run=run).pass_rate == 0.5
    assert list(JudgeCall.objects.filter(run=run).values_list("status", flat=True)) == ["ok"] * 4
    assert (
        list(JudgeCall.objects.filter(run=again).values_list("status", flat=True)) == ["cached"] * 4
    )


def test_a_response_the_judge_cannot_label_fails_the_run_and_resume_asks_only_it(
    submit: Any, django_capture_on_commit_callbacks: Any
) -> None:
    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl", refusal_signal="openai")
    state = {"down": True, "calls": 0}

    def handler(body: dict[str, Any]) -> Any:
        state["calls"] += 1
        user = body["messages"][1]["content"]
        if state["down"] and "Make a gun?" in user:
            return 400, error_body("bad request")  # not transient: the vote fails at once
        return completion(json.dumps({"label": label_of(user), "reason": "ok"}))

    with (
        FakeOpenAI(handler) as server,
        override_settings(
            OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-test", JUDGE_MAX_RETRIES=0
        ),
    ):
        run = submit(suite_name="mini", model_name="bad", text=responses_jsonl(BAD))
        assert run.status == RunStatus.FAILED and run.failed_items == 1
        assert "1 item(s) could not be judged" in run.error and "bad request" in run.error, (
            run.error
        )
        assert ProbeCaseResult.objects.filter(run=run).count() == 3  # never scored unlabelled
        assert not ProbeRunReport.objects.filter(run=run).exists()
        before = state["calls"]
        state["down"] = False
        with django_capture_on_commit_callbacks(execute=True):
            run_resume(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert state["calls"] - before == 1  # only the failed response was asked again
    assert ProbeCaseResult.objects.filter(run=run).count() == 4
    assert ProbeRunReport.objects.get(run=run).pass_rate == 0.5
