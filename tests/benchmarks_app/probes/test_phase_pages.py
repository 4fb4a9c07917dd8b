"""The probe board page honours ?phase= and shows a suite's phases as tabs, as the audit and
checklist boards do (issue 26, item 4)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks_app.services.phases import phase_create
from tests.benchmarks_app.probes.conftest import GOOD, responses_jsonl

pytestmark = pytest.mark.django_db

PAGE = "/probes/"


@pytest.fixture
def phased(suite, submit):
    submit(suite_name="mini", model_name="before-model", text=responses_jsonl(GOOD))
    now = timezone.now()
    phase = phase_create(
        target=suite,
        name="Final round",
        slug="final",
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
    )
    submit(suite_name="mini", model_name="final-model", text=responses_jsonl(GOOD))
    return phase


def _tabs(page: str) -> list[tuple[str, bool]]:
    nav = re.search(r'<nav class="tabs" id="phase-tabs".*?</nav>', page, re.S)
    assert nav is not None, "no phase tabs"
    return [
        (re.sub(r"<[^>]+>", "", label).strip(), "active" in attrs)
        for attrs, label in re.findall(r"<a ([^>]*)>(.*?)</a>", nav.group(0))
    ]


def test_phase_parameter_shows_the_phase_board(client, phased):
    page = client.get(PAGE, {"phase": "final"}).content.decode()
    assert "final-model" in page and "before-model" not in page
    assert 'id="board-phase"' in page and "Final round" in page
    assert _tabs(page) == [("All entries", False), ("Final round", True)]
    # Named with its suite, the same board.
    same = client.get(PAGE, {"suite": "mini", "phase": "final"}).content.decode()
    assert "final-model" in same and "before-model" not in same


def test_suite_page_has_phase_tabs_and_all_entries(client, phased):
    page = client.get(PAGE, {"suite": "mini"}).content.decode()
    assert "final-model" in page and "before-model" in page
    assert _tabs(page) == [("All entries", True), ("Final round", False)]
    assert f'href="{reverse("probes:leaderboard")}?suite=mini&amp;phase=final"' in page
    # The page of every suite links each suite's phases.
    every = client.get(PAGE).content.decode()
    assert 'class="small muted phase-links"' in every and "phase=final" in every


def test_unknown_phase_is_a_404(client, phased):
    answer = client.get(PAGE, {"phase": "nope"})
    assert answer.status_code == 404
    answer = client.get(PAGE, {"suite": "mini", "phase": "nope"})
    assert answer.status_code == 404


def test_scatter_ticks_read_their_values(client, django_capture_on_commit_callbacks) -> None:
    # The ticks sit at 0, 0.25, 0.5, 0.75 and 1: their labels said 0.2 and 0.8 (issue 26).
    import json

    from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
    from tests.browser.test_scenario import OUTPUTS, PROBES

    probe_suite_import(
        name="ticks", text="\n".join(json.dumps(p) for p in PROBES), fmt="jsonl", source_name="t"
    )
    text = "\n".join(json.dumps({"probe_id": k, "output": v}) for k, v in OUTPUTS.items())
    with django_capture_on_commit_callbacks(execute=True):
        run = probe_submission_submit(suite_name="ticks", model_name="m", text=text, fmt="jsonl")
    html = client.get(reverse("probes:submission", args=[run.probe_submission_id])).content
    assert b'id="probe-scatter"' in html
    labels = re.findall(r'text-anchor="middle">([\d.]+)</text>', html.decode())
    assert labels == ["0.00", "0.25", "0.50", "0.75", "1.00"]


def test_high_stakes_column_says_it_is_a_share_of_failures(client, phased) -> None:
    # It is the share of a model's failures on critical/high probes, not a rate over probes.
    html = client.get(PAGE, {"suite": "mini"}).content.decode()
    headers = [
        re.sub(r"<[^>]+>", "", h).strip().rstrip("↕↑↓ ")
        for h in re.findall(r"<th[^>]*>(.*?)</th>", html, re.S)
    ]
    assert "High-stakes share of failures" in headers
    assert "High-stakes" not in headers
