"""A probe run read, scored and stored page by page (issue 14) stores the same cases and the
same report as one read all at once, also when a resumed run has gaps across pages."""

from __future__ import annotations

import pytest

from benchmarks_app.models import EvaluationRun, ProbeCaseResult, ProbeRunReport, RunStatus
from benchmarks_app.services.probes import processing
from benchmarks_app.tasks.probes import process_probe_run
from tests.benchmarks_app.probes.conftest import BAD, responses_jsonl

pytestmark = pytest.mark.django_db


def _cases(run: EvaluationRun) -> dict[str, dict]:
    return {
        r.probe.probe_id: r.case
        for r in ProbeCaseResult.objects.filter(run=run).select_related("probe")
    }


def _report(run: EvaluationRun) -> tuple[dict, object, object]:
    report = ProbeRunReport.objects.get(run=run)
    return report.metrics, report.agreement, report.ci


def test_pages_store_what_one_read_stores(suite, submit, monkeypatch):
    whole = submit(suite_name="mini", model_name="whole", text=responses_jsonl(BAD))
    monkeypatch.setattr(processing, "CHUNK", 3)  # 4 responses: pages of 3 and 1
    paged = submit(suite_name="mini", model_name="paged", text=responses_jsonl(BAD))
    assert whole.status == paged.status == RunStatus.SUCCEEDED
    assert len(_cases(paged)) == 4 and _cases(paged) == _cases(whole)
    assert _report(paged) == _report(whole)
    assert paged.progress_done == paged.progress_total == 4


def test_a_resumed_run_fills_gaps_across_pages(suite, submit, monkeypatch):
    monkeypatch.setattr(processing, "CHUNK", 2)
    run = submit(suite_name="mini", model_name="gaps", text=responses_jsonl(BAD))
    before, report = _cases(run), _report(run)
    kept = set(
        ProbeCaseResult.objects.filter(run=run, probe__probe_id__in=["w1", "b2"]).values_list(
            "id", flat=True
        )
    )
    ProbeCaseResult.objects.filter(run=run).exclude(id__in=kept).delete()  # one gap a page
    ProbeRunReport.objects.filter(run=run).delete()
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)
    process_probe_run(run.pk)
    assert kept <= set(ProbeCaseResult.objects.filter(run=run).values_list("id", flat=True))
    assert _cases(run) == before and _report(run) == report
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.progress_done == run.progress_total == 4
