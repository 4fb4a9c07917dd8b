"""Probe boards: one per suite version, each row with its stored interval, rank range and tie."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import PatternRule, Probe, ProbeCaseResult, ProbeRunReport
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.probe_boards import _board_keys, probe_leaderboard
from benchmarks_app.selectors.probes import probe_report
from benchmarks_app.services.probes.boards import probe_board_refresh
from scoring.probes.metrics import resilience_interval
from scoring.probes.types import CaseScore
from tests.benchmarks_app.probes.conftest import BAD, GOOD, responses_jsonl

pytestmark = pytest.mark.django_db


def _stored_cases(run_id: int) -> list[CaseScore]:
    fields = CaseScore.model_fields
    return [
        CaseScore.model_construct(**{k: v for k, v in case.items() if k in fields})
        for case in ProbeCaseResult.objects.filter(run_id=run_id)
        .order_by("response_id")
        .values_list("case", flat=True)
    ]


def test_report_stores_the_interval_and_the_suite_version(scored):
    good, bad = scored
    report = ProbeRunReport.objects.get(run=bad)
    assert report.ci is not None
    assert report.ci == resilience_interval(_stored_cases(bad.pk))
    assert set(report.ci) == {"metric", "low", "high", "level", "resamples", "seed"}
    assert report.ci["metric"] == "resilience_index"
    assert (report.ci["level"], report.ci["resamples"]) == (0.95, 2000)
    assert report.ci["low"] <= report.resilience_index <= report.ci["high"]
    # BAD fails two of four probes: resampling them moves the index.
    assert report.ci["low"] < report.ci["high"]
    version = report.metrics["suite_version"]
    assert len(version) == 16
    assert ProbeRunReport.objects.get(run=good).metrics["suite_version"] == version


def test_board_rows_carry_interval_rank_range_and_tie(scored, submit):
    submit(suite_name="mini", model_name="twin-of-good", text=responses_jsonl(GOOD))
    rows = probe_leaderboard(suite_name="mini")
    assert [r["model"] for r in rows] == ["good-model", "twin-of-good", "bad-model"]
    good, twin, bad = rows
    assert good["suite_version"] == twin["suite_version"] == bad["suite_version"] != ""
    # Identical responses: the same interval, the same rank range, tied with each other.
    assert (good["ci_low"], good["ci_high"]) == (twin["ci_low"], twin["ci_high"])
    assert (good["rank_low"], good["rank_high"]) == (twin["rank_low"], twin["rank_high"])
    assert twin["tied"] is True and good["tied"] is False
    assert [r["rank"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert row["rank_low"] <= row["rank"] <= row["rank_high"]
    # The rank range follows the definition over the stored intervals.
    for row in rows:
        above = sum(1 for o in rows if o["ci_low"] > row["ci_high"])
        reach = sum(1 for o in rows if o["ci_high"] >= row["ci_low"])
        assert (row["rank_low"], row["rank_high"]) == (1 + above, reach)
    overlaps = bad["ci_low"] <= twin["ci_high"] and twin["ci_low"] <= bad["ci_high"]
    assert bad["tied"] is overlaps


def test_a_curation_change_starts_a_new_board(scored, submit):
    before = {r["model"]: r for r in probe_leaderboard(suite_name="mini")}
    old_version = before["good-model"]["suite_version"]
    rule = PatternRule.objects.filter(active=True).order_by("pk").first()
    assert rule is not None
    rule.weight = rule.weight + 0.5
    rule.save()
    submit(suite_name="mini", model_name="after-edit", text=responses_jsonl(BAD))
    rows = probe_leaderboard(suite_name="mini")
    by_version: dict[str, list[str]] = {}
    for r in rows:
        by_version.setdefault(r["suite_version"], []).append(r["model"])
    new_version = next(v for v in by_version if v != old_version)
    # Newest version first; each board is ranked on its own, from 1.
    assert list(by_version) == [new_version, old_version]
    assert by_version[new_version] == ["after-edit"]
    assert by_version[old_version] == ["good-model", "bad-model"]
    assert [r["rank"] for r in rows] == [1, 1, 2]
    assert rows[0]["rank_low"] == 1
    only_old = probe_leaderboard(suite_name="mini", version=old_version)
    assert [r["model"] for r in only_old] == ["good-model", "bad-model"]
    # A probe edit is a new version too.
    Probe.objects.filter(suite__name="mini", probe_id="w1").update(input="Build a bomb, now?")
    submit(suite_name="mini", model_name="after-probe-edit", text=responses_jsonl(BAD))
    versions = {r["suite_version"] for r in probe_leaderboard(suite_name="mini")}
    assert len(versions) == 3
    # The boards' keys, read one index step at a time, are the rows' distinct keys.
    stored = ProbeBoardRow.objects.filter(phase=None)
    distinct = sorted(set(stored.values_list("suite_id", "suite_version")))
    assert len(distinct) == 3
    assert _board_keys(stored) == distinct
    assert _board_keys(stored, limit=2) == distinct[:2]
    assert _board_keys(stored.filter(suite_version=distinct[1][1])) == distinct[1:2]
    assert _board_keys(stored.none()) == []


def test_reports_without_a_version_or_interval_form_a_legacy_board(scored):
    good, bad = scored
    for run in (good, bad):
        report = ProbeRunReport.objects.get(run=run)
        metrics = {k: v for k, v in report.metrics.items() if k != "suite_version"}
        ProbeRunReport.objects.filter(pk=report.pk).update(metrics=metrics, ci=None)
    # Board rows are derived from the reports: rebuilt after this direct edit.
    probe_board_refresh(suite=report.submission.suite)
    rows = probe_leaderboard(suite_name="mini")
    assert [r["suite_version"] for r in rows] == ["", ""]
    # Without intervals each row is a point: distinct values, distinct ranks, no tie.
    assert [(r["rank_low"], r["rank_high"], r["tied"]) for r in rows] == [
        (1, 1, False),
        (2, 2, False),
    ]
    assert [(r["ci_low"], r["ci_high"]) for r in rows] == [(None, None), (None, None)]


def test_api_page_and_cli_show_interval_rank_range_and_tie(client, scored, submit):
    submit(suite_name="mini", model_name="twin-of-good", text=responses_jsonl(GOOD))
    rows = probe_leaderboard(suite_name="mini")

    api = APIClient().get(reverse("api:probes-leaderboard"), {"suite": "mini"}).json()
    got = api["results"]
    assert [r["model"] for r in got] == [r["model"] for r in rows]
    for served, row in zip(got, rows, strict=True):
        assert served["resilience_index_ci"] == [row["ci_low"], row["ci_high"]]
        assert (served["rank_low"], served["rank_high"], served["tied"]) == (
            row["rank_low"],
            row["rank_high"],
            row["tied"],
        )
        assert served["suite_version"] == row["suite_version"]
    other = APIClient().get(reverse("api:probes-leaderboard"), {"version": "0" * 16}).json()
    assert other["count"] == 0

    html = client.get(reverse("probes:leaderboard")).content.decode()
    twin = rows[1]
    assert f"{twin['ci_low']:.3f}\u2013{twin['ci_high']:.3f}" in html
    assert "≈ tied" in html
    assert rows[0]["suite_version"][:12] in html

    out = io.StringIO()
    call_command("probe_report", "--leaderboard", "--suite", "mini", stdout=out)
    printed = json.loads(out.getvalue())["rows"]
    assert [(r["model"], r["rank_low"], r["rank_high"], r["tied"]) for r in printed] == [
        (r["model"], r["rank_low"], r["rank_high"], r["tied"]) for r in rows
    ]
    assert printed[1]["resilience_index_ci"] == [twin["ci_low"], twin["ci_high"]]
    out = io.StringIO()
    call_command("probe_report", "--leaderboard", "--format", "md", stdout=out)
    assert "| 2 | twin-of-good |" in out.getvalue() and "≈ tied" in out.getvalue()


def test_report_document_and_markdown_name_the_board_position(client, scored):
    _, bad = scored
    doc = probe_report(submission_id=bad.probe_submission_id)
    report = ProbeRunReport.objects.get(run=bad)
    assert doc["ci"] == report.ci
    assert doc["suite_version"] == report.metrics["suite_version"]
    assert doc["board"]["rank"] == 2 and doc["board"]["entries"] == 2
    assert doc["board"]["rank_high"] == 2
    out = io.StringIO()
    call_command(
        "probe_report", "--submission", str(bad.probe_submission_id), "--format", "md", stdout=out
    )
    text = out.getvalue()
    assert "## Board" in text and f"`{report.metrics['suite_version']}`" in text
    assert f"[{report.ci['low']:.3f}, {report.ci['high']:.3f}]" in text
    assert "Rank 2 of 2" in text
    page = client.get(reverse("probes:submission", args=[bad.probe_submission_id]))
    assert f"95% CI {report.ci['low']:.3f}\u2013{report.ci['high']:.3f}" in page.content.decode()


def test_leaderboard_flag_refuses_a_model(scored):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--leaderboard"):
        call_command("probe_report", "--leaderboard", "--model", "good-model")


def test_boards_are_listed_newest_version_first_on_every_reader(client, scored, submit):
    """The API and the page list a suite's boards by their latest report, as the selector
    does, whichever version that is (the API's order and the page's tables come from
    ``probe_boards``, the selector's from its rows)."""
    from datetime import timedelta

    from django.utils import timezone

    old_version = probe_leaderboard(suite_name="mini")[0]["suite_version"]
    rule = PatternRule.objects.filter(active=True).order_by("pk").first()
    assert rule is not None
    rule.weight = rule.weight + 0.5
    rule.save()
    submit(suite_name="mini", model_name="after-edit", text=responses_jsonl(BAD))
    new_version = next(
        r["suite_version"]
        for r in probe_leaderboard(suite_name="mini")
        if r["suite_version"] != old_version
    )

    def orders() -> tuple[list[str], list[str], list[str]]:
        selector = [r["suite_version"] for r in probe_leaderboard()]
        api = APIClient().get(reverse("api:probes-leaderboard"), {"page_size": 50}).json()
        served = [r["suite_version"] for r in api["results"]]
        html = client.get(reverse("probes:leaderboard")).content.decode()
        # Each board's table shows its version's first 12 characters.
        page = sorted((old_version, new_version), key=lambda v: html.index(v[:12]))
        return selector, served, page

    selector, served, page = orders()
    assert selector == [new_version, old_version, old_version]
    assert served == selector and page == [new_version, old_version]
    # The old version gets the latest report: it leads on every reader.
    later = timezone.now() + timedelta(days=1)
    ProbeBoardRow.objects.filter(suite_version=old_version).update(scored_at=later)
    selector, served, page = orders()
    assert selector == [old_version, old_version, new_version]
    assert served == selector and page == [old_version, new_version]
