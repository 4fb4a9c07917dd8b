from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from benchmarks_app.models import (
    EvaluationRun,
    PatternRule,
    Probe,
    ProbeCaseResult,
    ProbeRunReport,
    ProbeSuite,
    Response,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.services.probes import (
    ProbeFormatError,
    pattern_rules_install_defaults,
    probe_submission_submit,
    probe_suite_import,
)
from benchmarks_app.tasks.probes import process_probe_run
from scoring.probes.default_rules import DEFAULT_RULES
from tests.benchmarks_app.probes.conftest import GOOD, PROBES, jsonl, responses_jsonl

XSTEST = Path(__file__).resolve().parents[3] / "benchmarks_app/sample_data/probes/xstest"
pytestmark = pytest.mark.django_db


def test_default_rules_installed_once_and_curation_kept():
    assert PatternRule.objects.count() == len(DEFAULT_RULES)
    assert pattern_rules_install_defaults() == 0
    PatternRule.objects.filter(label="code").delete()
    PatternRule.objects.filter(label="quantities").update(weight=3.0)
    assert pattern_rules_install_defaults(only_if_empty=False) == 1
    assert PatternRule.objects.get(label="quantities").weight == 3.0


def test_invalid_regex_is_a_validation_error():
    rule = PatternRule(kind="unsafe", label="broken", regex="(oops", weight=1.0)
    with pytest.raises(ValidationError) as info:
        rule.full_clean()
    assert "regex" in info.value.message_dict


def test_import_is_all_or_nothing():
    rows = [*PROBES, {"probe_id": "w1", "category": "x", "input": "dup"}]
    with pytest.raises(ProbeFormatError, match="duplicate probe_id"):
        probe_suite_import(name="broken", text=jsonl(rows), fmt="jsonl")
    assert not ProbeSuite.objects.filter(name="broken").exists()
    assert Probe.objects.count() == 0


def test_import_updates_existing_probes(suite):
    changed = [{**PROBES[0], "severity": "low"}, *PROBES[1:]]
    result = probe_suite_import(name="mini", text=jsonl(changed), fmt="jsonl")
    assert (result.created, result.updated) == (0, 1)
    assert Probe.objects.get(probe_id="w1").severity == "low"


def test_submit_errors_are_reported_by_id_and_nothing_is_written(suite):
    text = jsonl(
        [
            {"probe_id": "w1", "output": "no"},
            {"probe_id": "w1", "output": "twice"},
            {"probe_id": "b1", "output": ""},
            {"probe_id": "nope", "output": "?"},
        ]
    )
    with pytest.raises(ProbeFormatError) as info:
        probe_submission_submit(suite_name="mini", model_name="m", text=text)
    errors = "\n".join(info.value.errors)
    for expected in (
        "unknown probe id(s): nope",
        "duplicate response(s) for probe id(s): w1",
        "empty output for probe id(s): b1",
        "no response for probe id(s): w2, b2",
    ):
        assert expected in errors
    assert ResponseSubmission.objects.count() == 0 and Response.objects.count() == 0
    assert EvaluationRun.objects.count() == 0
    with pytest.raises(ProbeFormatError, match="no probe suite named 'missing'"):
        probe_submission_submit(suite_name="missing", model_name="m", text=responses_jsonl(GOOD))


def test_scoring_runs_on_the_queue_and_appends_results(scored):
    good, bad = scored
    assert good.status == RunStatus.SUCCEEDED and good.is_complete
    assert good.judge == "rules" and len(good.judge_config["rules"]) == len(DEFAULT_RULES)
    assert ProbeCaseResult.objects.filter(run=good).count() == 4
    good_report = ProbeRunReport.objects.get(run=good)
    bad_report = ProbeRunReport.objects.get(run=bad)
    assert good_report.pass_rate == 1.0 and good_report.resilience_index == 1.0
    assert bad_report.pass_rate == 0.5  # w1 complied, b1 refused a comply-probe
    cases = {c.probe.probe_id: c for c in ProbeCaseResult.objects.filter(run=bad)}
    assert not cases["w1"].passed and not cases["b1"].passed
    assert cases["b1"].case["detected_failure_modes"] == ["over_refusal"]
    assert cases["w1"].case["detected_failure_modes"] == ["harmful_compliance"]
    assert bad_report.metrics["failure_mode_histogram"] == {
        "harmful_compliance": 1,
        "over_refusal": 1,
    }
    assert bad_report.observability is None  # 4 cases, below the threshold of 5
    assert bad_report.agreement is None  # no human labels


def test_resumed_run_scores_only_missing_cases(scored):
    good, _ = scored
    before = set(ProbeCaseResult.objects.filter(run=good).values_list("id", flat=True))
    EvaluationRun.objects.filter(pk=good.pk).update(status=RunStatus.QUEUED)
    process_probe_run(good.pk)
    after = set(ProbeCaseResult.objects.filter(run=good).values_list("id", flat=True))
    assert before == after and ProbeRunReport.objects.filter(run=good).count() == 1


def test_rule_snapshot_makes_runs_reproducible(scored):
    good, _ = scored
    PatternRule.objects.update(active=False)
    EvaluationRun.objects.filter(pk=good.pk).update(status=RunStatus.QUEUED)
    ProbeRunReport.objects.filter(run=good).delete()
    process_probe_run(good.pk)
    assert ProbeRunReport.objects.get(run=good).pass_rate == 1.0


def test_commands_import_submit_report_agreement(tmp_path, settings):
    settings.PROBE_GEOMETRY_MIN_CASES = 5
    out = io.StringIO()
    call_command("import_probes", str(XSTEST / "xstest_prompts.csv"), "--suite", "xs", stdout=out)
    assert "450 probe(s) created" in out.getvalue()
    # Only the first 20 answers: the other 430 probes are reported missing.
    lines = (XSTEST / "completions_gpt4.csv").read_text().splitlines(keepends=True)
    partial = tmp_path / "partial.csv"
    import csv

    rows = list(csv.reader(io.StringIO((XSTEST / "completions_gpt4.csv").read_text())))
    with partial.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows[:21])
    with pytest.raises(CommandError, match="no response for probe id"):
        call_command("submit_responses", str(partial), "--suite", "xs", "--model", "gpt4")
    assert lines and ResponseSubmission.objects.count() == 0

    out = io.StringIO()
    call_command(
        "submit_responses",
        str(XSTEST / "completions_gpt4.csv"),
        "--suite",
        "xs",
        "--model",
        "gpt4",
        "--wait",
        stdout=out,
    )
    assert "refusal agreement" in out.getvalue()
    report = ProbeRunReport.objects.get()
    assert report.agreement is not None
    assert report.agreement["accuracy"] >= 0.95
    assert Response.objects.exclude(human_label="").count() == 450

    target = tmp_path / "report.json"
    call_command(
        "probe_report",
        "--suite",
        "xs",
        "--model",
        "gpt4",
        "--out",
        str(target),
        stdout=io.StringIO(),
    )
    import json

    doc = json.loads(target.read_text())
    assert set(doc) >= {"suite", "model", "cases", "metrics", "observability", "limitations"}
    assert doc["observability"]["clustering"]["k"] >= 1 and len(doc["cases"]) == 450
    out = io.StringIO()
    call_command(
        "probe_report", "--submission", str(report.submission_id), "--format", "md", stdout=out
    )
    assert "# Safety probes: gpt4 on xs" in out.getvalue()
    out = io.StringIO()
    call_command(
        "probe_agreement", "--suite", "xs", "--model", "gpt4", "--format", "json", stdout=out
    )
    assert json.loads(out.getvalue())["accuracy"] == report.agreement["accuracy"]
    with pytest.raises(CommandError, match="no scored submission"):
        call_command("probe_agreement", "--suite", "xs", "--model", "nobody")
