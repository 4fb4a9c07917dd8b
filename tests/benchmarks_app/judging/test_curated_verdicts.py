"""Curated verdicts: the review queue, settling an item, history, imports and agreement figures."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score

from benchmarks_app.models import (
    AppendOnlyError,
    AuditTruthResult,
    CuratedVerdict,
    EvaluationRun,
    ProbeRunReport,
    Scanner,
    VerdictSource,
)
from benchmarks_app.selectors.judge_agreement import SPLIT_VOTE, judge_agreement, judges_agreement
from benchmarks_app.selectors.verdict_review_queue import review_queue
from benchmarks_app.services.audit import audit_import_path, audit_run_create
from benchmarks_app.services.curated_verdicts import (
    CuratedVerdictError,
    curated_verdict_record,
    curated_verdicts_import_audit_recorded,
    curated_verdicts_import_xstest,
    recorded_audit_verdict,
)
from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.judging.split_votes import SPLIT_TRUTH, split_vote_run

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data"


@pytest.fixture
def maintainer(db: Any) -> Any:
    return get_user_model().objects.create_user("curator", password="pw", is_staff=True)


def _split_item(settings: Any) -> Any:
    settings.JUDGE_REVIEW_SAMPLE_RATE = 0.0
    split_vote_run(settings)
    queue = review_queue()
    return queue, [i for i in queue if SPLIT_TRUTH in i.item_label]


def test_a_split_vote_is_queued_and_settling_it_changes_the_judges_agreement(
    settings: Any, maintainer: Any
) -> None:
    queue, split = _split_item(settings)
    assert len(split) == 1 and split[0].reasons[0] == SPLIT_VOTE
    assert split[0].judgements[0].label == "match"
    assert sorted(split[0].judgements[0].detail["votes"]) == ["match", "match", "none"]
    # The other truth was judged unanimously: not contested, and the sample rate is 0.
    assert len(queue) == 1
    assert judge_agreement("openai") == [] or judge_agreement("openai")[0]["n"] == 0

    first = curated_verdict_record(
        benchmark="audit",
        item_key=split[0].item_key,
        verdict="none",
        author=maintainer,
        note="the scan finding is about deposits",
        item_label=split[0].item_label,
    )
    figures = judge_agreement("openai")
    assert [(f["benchmark"], f["n"], f["accuracy"]) for f in figures] == [("audit", 1, 0.0)]
    assert review_queue() == []  # settled items leave the queue

    # A second look supersedes the first; the first stays as it was, with its author.
    second = curated_verdict_record(
        benchmark="audit",
        item_key=split[0].item_key,
        verdict="match",
        author=maintainer,
        expected_current_id=first.pk,
    )
    assert second.supersedes_id == first.pk and second.item_label == first.item_label
    first.refresh_from_db()
    assert (first.verdict, first.author, first.note) == ("none", maintainer, first.note)
    assert list(CuratedVerdict.objects.current()) == [second]
    assert judge_agreement("openai")[0]["accuracy"] == 1.0
    with pytest.raises(AppendOnlyError):
        first.save()


def test_settling_an_item_that_changed_meanwhile_is_refused(settings: Any, maintainer: Any) -> None:
    _, split = _split_item(settings)
    key = split[0].item_key
    curated_verdict_record(benchmark="audit", item_key=key, verdict="match", author=maintainer)
    # Another maintainer's form was loaded before that verdict: it must not supersede unseen.
    with pytest.raises(CuratedVerdictError, match=r"item_key: .* changed meanwhile"):
        curated_verdict_record(benchmark="audit", item_key=key, verdict="none", author=maintainer)
    assert CuratedVerdict.objects.count() == 1


def test_a_verdict_outside_the_benchmarks_classes_is_named(maintainer: Any) -> None:
    with pytest.raises(CuratedVerdictError, match="verdict: 'maybe' is not one of"):
        curated_verdict_record(benchmark="audit", item_key="r/F-1@x", verdict="maybe", author=None)
    with pytest.raises(CuratedVerdictError, match="benchmark: 'checklist' has no curated"):
        curated_verdict_record(benchmark="checklist", item_key="k", verdict="yes", author=None)
    assert not CuratedVerdict.objects.exists()


def test_recorded_verdicts_import_once_and_the_offline_judge_is_compared_with_them(
    maintainer: Any,
) -> None:
    audit_import_path(path=SAMPLE / "audit")
    scanner = Scanner.objects.get(name="baseline")
    run = run_wait(run=audit_run_create(scanner=scanner, judge="offline"))
    assert run.status == "succeeded"
    folder = SAMPLE / "audit" / "recorded"
    report = curated_verdicts_import_audit_recorded(folder=folder, scanner_name="baseline")
    recorded = {
        p.name.removesuffix("_results.json"): [
            r for r in json.loads(p.read_text()) if not r.get("is_fp")
        ]
        for p in folder.glob("*_results.json")
    }
    assert report.created == sum(len(rows) for rows in recorded.values()) and not report.skipped
    again = curated_verdicts_import_audit_recorded(folder=folder, scanner_name="baseline")
    assert (again.created, again.unchanged) == (0, report.created)

    # Independently: the offline run's outcomes against the files, kappa by scikit-learn.
    judged, curated = [], []
    results = AuditTruthResult.objects.filter(run=run).select_related("truth_finding__repo")
    by_repo: dict[str, list[Any]] = {}
    for r in results.order_by("truth_finding__order", "truth_finding_id"):
        by_repo.setdefault(r.truth_finding.repo.project_id, []).append(r)
    for project, rows in recorded.items():
        for result, row in zip(by_repo[project], rows, strict=True):
            judged.append(result.outcome)
            curated.append(recorded_audit_verdict(row))
    figures = {f["benchmark"]: f for f in judge_agreement("offline")}["audit"]
    assert figures["n"] == len(judged)
    assert figures["accuracy"] == pytest.approx(
        sum(a == b for a, b in zip(judged, curated, strict=True)) / len(judged)
    )
    assert figures["kappa"] == pytest.approx(cohen_kappa_score(judged, curated))
    assert figures["kappa_ci"]["low"] <= figures["kappa"] <= figures["kappa_ci"]["high"]

    # A maintainer's verdict outranks the file on the next import.
    item = CuratedVerdict.objects.current().filter(verdict="none").first()
    assert item is not None
    curated_verdict_record(
        benchmark="audit",
        item_key=item.item_key,
        verdict="partial",
        author=maintainer,
        expected_current_id=item.pk,
    )
    third = curated_verdicts_import_audit_recorded(folder=folder, scanner_name="baseline")
    assert (third.kept, third.created, third.superseded) == (1, 0, 0)
    current = CuratedVerdict.objects.current().get(item_key=item.item_key)
    assert (current.verdict, current.source) == ("partial", VerdictSource.MAINTAINER)


def test_recorded_import_names_what_it_skips(tmp_path: Path) -> None:
    (tmp_path / "nowhere_2025_01_results.json").write_text("[]")
    report = curated_verdicts_import_audit_recorded(folder=tmp_path, scanner_name="baseline")
    assert report.skipped == [
        "nowhere_2025_01_results.json: repo 'nowhere_2025_01' is not imported"
    ]
    with pytest.raises(CuratedVerdictError, match=r"folder: .* is not a folder"):
        curated_verdicts_import_audit_recorded(folder=tmp_path / "no", scanner_name="baseline")


def test_xstest_labels_agree_with_the_runs_own_human_label_figures(client: Any) -> None:
    xstest = SAMPLE / "probes" / "xstest"
    probe_suite_import(
        name="xstest",
        text=(xstest / "xstest_prompts.csv").read_text(encoding="utf-8"),
        fmt="xstest",
        source_name="xstest_prompts.csv",
    )
    text = (xstest / "completions_gpt4.csv").read_text(encoding="utf-8")
    run = run_wait(
        run=probe_submission_submit(
            suite_name="xstest", model_name="gpt-4", text=text, fmt="xstest"
        )
    )
    report = curated_verdicts_import_xstest(
        suite_name="xstest", text=text, source_name="completions_gpt4.csv"
    )
    assert report.created == 450 and not report.skipped
    # The run's report compares the same signal with Response.human_label, a separate path.
    own = ProbeRunReport.objects.get(run=run).agreement
    assert own is not None
    figures = judges_agreement()
    assert [(f["judge"], f["benchmark"]) for f in figures] == [
        (EvaluationRun.objects.get().judge_config["refusal"]["signal"], "probes")
    ]
    assert figures[0]["n"] == own["n"] == 450
    assert figures[0]["accuracy"] == pytest.approx(own["accuracy"])
    assert figures[0]["kappa"] == pytest.approx(own["kappa"])
    # The suite's board says the same, in the API and on the page.
    board = client.get("/api/probes/leaderboard/agreement/", {"suite": "xstest"}).json()
    (only,) = board["results"]
    assert only["judge_agreement"]["n"] == 450
    assert only["judge_agreement"]["kappa"] == pytest.approx(own["kappa"])
    page = client.get("/probes/").content.decode()
    assert re.search(r'class="[^"]*\bjudge-agreement\b[^"]*" data-n="450"', page)
    # The signal is the judge: asking for the other signal finds none of its judgements.
    signal = figures[0]["judge"]
    other = "rules" if signal == "classifier" else "classifier"
    assert [f["n"] for f in judge_agreement(signal)] == [450]
    assert judge_agreement(other) == []


def test_import_command_prints_every_judges_figures(settings: Any) -> None:
    split_vote_run(settings)
    out = io.StringIO()
    call_command("import_curated_verdicts", stdout=out)
    text = out.getvalue()
    assert "openai / audit: n=0, accuracy —, kappa —" in text
    assert "has 0 curated comparisons on audit findings (fewer than 30)" in text
    settings.JUDGE_AGREEMENT_MIN_CURATED = 1
    key = review_queue()[0].item_key
    curated_verdict_record(benchmark="audit", item_key=key, verdict="match", author=None)
    out = io.StringIO()
    call_command("import_curated_verdicts", "--judge", "openai", "--format", "json", stdout=out)
    (figures,) = json.loads(out.getvalue())
    assert (figures["n"], figures["accuracy"], figures["warnings"]) == (1, 1.0, [])


def test_the_review_sample_is_seeded_and_near_its_rate() -> None:
    from benchmarks_app.selectors.verdict_review_queue import in_sample

    keys = [f"repo/F-{i}@hash" for i in range(4000)]
    drawn = [k for k in keys if in_sample(k, rate=0.1, seed=0)]
    assert drawn == [k for k in keys if in_sample(k, rate=0.1, seed=0)]
    assert 0.08 < len(drawn) / len(keys) < 0.12
    assert drawn != [k for k in keys if in_sample(k, rate=0.1, seed=1)]
    assert not any(in_sample(k, rate=0.0, seed=0) for k in keys)
