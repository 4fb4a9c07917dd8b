"""The suite's refusal signal end to end: default, import, classifier runs, training."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, ProbeCaseResult, ProbeRunReport, RunStatus
from benchmarks_app.models.probes import ProbeSuite
from benchmarks_app.selectors.probes import probe_report
from benchmarks_app.services.probes import (
    ProbeFormatError,
    RefusalSignalError,
    probe_submission_submit,
    probe_suite_import,
    probe_suite_train_classifier,
)
from benchmarks_app.services.probes import refusal as refusal_service
from benchmarks_app.services.probes.refusal import bundled_classifier, default_refusal_signal
from benchmarks_app.tasks.probes import process_probe_run
from tests.benchmarks_app.probes.conftest import BAD, GOOD, PROBES, jsonl, responses_jsonl

pytestmark = pytest.mark.django_db

LABELS = {"w1": "2_full_refusal", "w2": "2_full_refusal", "b1": "1_full_compliance"}


def labelled(outputs: dict[str, str], labels: dict[str, str]) -> str:
    return jsonl(
        [{"probe_id": k, "output": v, "human_label": labels.get(k, "")} for k, v in outputs.items()]
    )


def test_a_new_suite_gets_the_signal_with_the_best_held_out_figures(settings: Any) -> None:
    bundled = bundled_classifier()
    assert bundled is not None and bundled.metadata["held_out"]  # the classifier has figures
    assert default_refusal_signal() == "classifier"  # the rules have none (in-sample only)
    suite = probe_suite_import(name="fresh", text=jsonl(PROBES), fmt="jsonl").suite
    assert suite.refusal_signal == "classifier"
    settings.PROBE_REFUSAL_SIGNAL_DEFAULT = "rules"
    assert (
        probe_suite_import(name="other", text=jsonl(PROBES), fmt="jsonl").suite.refusal_signal
        == "rules"
    )
    # An existing suite keeps its own signal when re-imported without one.
    assert (
        probe_suite_import(name="fresh", text=jsonl(PROBES), fmt="jsonl").suite.refusal_signal
        == "classifier"
    )


def test_without_a_readable_classifier_the_default_is_the_rules(monkeypatch: Any) -> None:
    monkeypatch.setattr(refusal_service, "bundled_classifier", lambda: None)
    assert default_refusal_signal() == "rules"
    with pytest.raises(ProbeFormatError, match=r"field 'refusal_signal'.*cannot be read"):
        probe_suite_import(name="x", text=jsonl(PROBES), fmt="jsonl", refusal_signal="classifier")
    assert not ProbeSuite.objects.filter(name="x").exists()  # all or nothing


def test_import_probes_sets_the_signal(tmp_path: Any) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(jsonl(PROBES))
    out = io.StringIO()
    call_command(
        "import_probes", str(path), "--suite", "s", "--refusal-signal", "rules", stdout=out
    )
    assert "refusal signal: rules" in out.getvalue()
    assert ProbeSuite.objects.get(name="s").refusal_signal == "rules"
    call_command(
        "import_probes",
        str(path),
        "--suite",
        "s",
        "--refusal-signal",
        "openai",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert ProbeSuite.objects.get(name="s").refusal_signal == "openai"
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("import_probes", str(path), "--suite", "s", "--refusal-signal", "magic")


def test_a_classifier_run_records_its_model_and_each_case_its_signal(
    suite: Any, submit: Any
) -> None:
    assert suite.refusal_signal == "classifier"
    run = submit(suite_name="mini", model_name="bad", text=responses_jsonl(BAD))
    assert run.status == RunStatus.SUCCEEDED, run.error
    bundled = bundled_classifier()
    assert bundled is not None
    assert run.judge == "rules"  # no paid judge
    assert run.judge_config["refusal"] == {
        "signal": "classifier",
        "classifier": {"name": "xstest-bundled", "sha256": bundled.sha256, "origin": "bundled"},
    }
    cases = {c.probe.probe_id: c.case for c in ProbeCaseResult.objects.filter(run=run)}
    assert {c["refusal_signal"] for c in cases.values()} == {"classifier"}
    assert cases["b1"]["refusal_score"] > 0.5 and cases["w1"]["refusal_score"] < 0.5
    assert not cases["b1"]["passed"] and cases["b1"]["detected_failure_modes"] == ["over_refusal"]
    assert "refusal signal: classifier (p " in cases["b1"]["explanation"]
    document = probe_report(submission_id=run.probe_submission_id)
    assert document["metrics"]["refusal_signal"]["signal"] == "classifier"
    assert document["cases"][0]["refusal_source"].startswith("classifier xstest-bundled (sha256 ")
    out = io.StringIO()
    call_command(
        "probe_report", "--submission", str(run.probe_submission_id), "--format", "md", stdout=out
    )
    assert "Refusal signal: **classifier**" in out.getvalue()


def test_a_rules_suite_scores_as_before(submit: Any) -> None:
    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl", refusal_signal="rules")
    run = submit(suite_name="mini", model_name="bad", text=responses_jsonl(BAD))
    assert run.judge_config["refusal"] == {"signal": "rules"}
    report = ProbeRunReport.objects.get(run=run)
    assert report.pass_rate == 0.5 and report.metrics["refusal_signal"]["signal"] == "rules"
    assert {c.case["refusal_signal"] for c in ProbeCaseResult.objects.filter(run=run)} == {"rules"}


def test_a_run_never_mixes_two_classifiers(suite: Any) -> None:
    probe_submission_submit(suite_name="mini", model_name="a", text=labelled(GOOD, LABELS))
    probe_submission_submit(suite_name="mini", model_name="b", text=labelled(BAD, LABELS))
    queued = probe_submission_submit(
        suite_name="mini", model_name="c", text=responses_jsonl(GOOD), enqueue=False
    )
    probe_suite_train_classifier(suite=suite)  # the suite's classifier changes meanwhile
    with pytest.raises(RefusalSignalError, match="changed since this run was queued"):
        process_probe_run(queued.pk)
    queued.refresh_from_db()
    assert queued.status == RunStatus.FAILED and "score the submission again" in queued.error
    assert not ProbeCaseResult.objects.filter(run=queued).exists()


def test_training_a_suites_classifier_from_its_labelled_submissions(
    suite: Any, submit: Any
) -> None:
    submit(suite_name="mini", model_name="a", text=labelled(GOOD, LABELS))
    submit(suite_name="mini", model_name="b", text=labelled(BAD, LABELS))
    submit(suite_name="mini", model_name="unlabelled", text=responses_jsonl(GOOD))
    out = io.StringIO()
    call_command("probe_agreement", "--cross-model", "--suite", "mini", stdout=out)
    text = out.getvalue()
    assert "suite 'mini'" in text and "string-match" in text
    assert {line.split()[0] for line in text.splitlines()[2:6]} == {"a", "b"}

    out = io.StringIO()
    call_command("probe_agreement", "--train", "--suite", "mini", "--keep-signal", stdout=out)
    suite.refresh_from_db()
    assert suite.refusal_classifier["metadata"]["training"]["models"] == {
        "a": {"responses": 3, "refusals": 2},
        "b": {"responses": 3, "refusals": 2},
    }
    assert "held-out model" in out.getvalue()
    run = submit(suite_name="mini", model_name="c", text=responses_jsonl(GOOD))
    assert run.judge_config["refusal"]["classifier"]["origin"] == "suite"
    assert run.status == RunStatus.SUCCEEDED, run.error


def test_cross_model_needs_two_labelled_models(suite: Any, submit: Any) -> None:
    submit(suite_name="mini", model_name="a", text=labelled(GOOD, LABELS))
    with pytest.raises(CommandError, match="at least two models"):
        call_command("probe_agreement", "--cross-model", "--suite", "mini")
    probe_suite_import(name="empty", text=jsonl(PROBES), fmt="jsonl")
    with pytest.raises(CommandError, match="no human-labelled responses"):
        call_command("probe_agreement", "--train", "--suite", "empty")
    out = io.StringIO()
    call_command("probe_agreement", "--train", "--suite", "mini", stdout=out)
    assert "One labelled model only" in out.getvalue()
    assert ProbeSuite.objects.get(name="mini").refusal_signal == "classifier"


def test_cross_model_on_the_bundled_files_prints_both_directions() -> None:
    out = io.StringIO()
    call_command("probe_agreement", "--cross-model", "--format", "json", stdout=out)
    rows = {r["held_out"]: r for r in json.loads(out.getvalue())}
    assert set(rows) == {"gpt-4", "llama-2-70b-chat"}
    bundled = bundled_classifier()
    assert bundled is not None
    stored = {r["held_out"]: r for r in bundled.metadata["held_out"]}
    for model, row in rows.items():
        assert row["trained_on"] == [m for m in rows if m != model]
        assert row["classifier"]["accuracy"] == stored[model]["classifier"]["accuracy"]
        assert row["classifier"]["accuracy"] >= row["string_match"]["accuracy"]


def test_admin_shows_and_trains_the_classifier(client: Any, suite: Any, submit: Any) -> None:
    admin = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(admin)
    page = client.get(reverse("admin:benchmarks_app_probesuite_change", args=[suite.pk]))
    assert page.status_code == 200
    assert "xstest-bundled (bundled, sha256" in page.content.decode()
    submit(suite_name="mini", model_name="a", text=labelled(GOOD, LABELS))
    page = client.post(
        reverse("admin:benchmarks_app_probesuite_changelist"),
        {"action": "train_classifier", "_selected_action": [suite.pk]},
        follow=True,
    )
    assert "one labelled model only" in page.content.decode()
    suite.refresh_from_db()
    assert suite.refusal_classifier is not None
    assert EvaluationRun.objects.count() == 1  # training scores nothing by itself


def test_admin_upload_sets_the_signal(client: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    admin = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(admin)
    upload = SimpleUploadedFile("p.jsonl", jsonl(PROBES).encode())
    page = client.post(
        reverse("admin:benchmarks_app_probesuite_upload"),
        {"suite": "adm", "file": upload, "refusal_signal": "rules"},
    )
    assert page.status_code == 302
    assert ProbeSuite.objects.get(name="adm").refusal_signal == "rules"
    listing = client.get(reverse("admin:benchmarks_app_probesuite_changelist"))
    assert "Boundary rules" in listing.content.decode()
