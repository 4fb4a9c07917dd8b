"""The review queue end to end in a real browser (issue 27's done-when): a maintainer logs into
the admin, opens the queue, reads the evidence of a judge's split vote (the truth finding's
description, the scanner's findings the judge saw, each vote's explanation; issue 37), settles
it, and the judge's agreement and its confusion matrix change."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from playwright.sync_api import expect

from benchmarks_app.models import EvaluationRun, JudgeRecord
from benchmarks_app.selectors.judge_agreement import judgements
from benchmarks_app.services.curated_verdicts import curated_verdict_record
from tests.benchmarks_app.judging.split_votes import (
    PLAIN_TRUTH,
    SCAN_DESCRIPTIONS,
    SPLIT_DESCRIPTION,
    SPLIT_TRUTH,
    split_vote_run,
)
from tests.factories.common import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _in_a_worker(settings: Any) -> EvaluationRun:
    # A run bridges to async code, which refuses to run beside Playwright's event loop.
    def work() -> EvaluationRun:
        try:
            return split_vote_run(settings)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result(timeout=120)


def test_a_maintainer_settles_a_split_vote_and_the_judges_agreement_changes(
    page: Any, settings: Any, screenshot: Any
) -> None:
    settings.JUDGE_REVIEW_SAMPLE_RATE = 0.0
    settings.JUDGE_AGREEMENT_MIN_CURATED = 1
    run = _in_a_worker(settings)
    # The unanimous truth was curated earlier (the judge got it right): accuracy 1.000 of 1.
    found = judgements(EvaluationRun.objects.filter(pk=run.pk))
    plain = next(j for j in found if PLAIN_TRUTH in j.item_label)
    curated_verdict_record(benchmark="audit", item_key=plain.item_key, verdict="none", author=None)
    maintainer = get_user_model().objects.create_superuser("maintainer", "m@example.org", PASSWORD)
    record = JudgeRecord.objects.get(name="openai")
    judge_page = f"/admin/benchmarks_app/judgerecord/{record.pk}/change/"

    page.goto("/admin/login/")
    page.fill("#id_username", maintainer.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.goto(judge_page)
    row = page.locator("#judge-agreement tr.agreement-row[data-benchmark=audit]")
    expect(row.locator(".agreement-n")).to_have_text("1")
    expect(row.locator(".agreement-accuracy")).to_contain_text("1.000")

    # The queue, from the curated verdicts' list.
    page.goto("/admin/benchmarks_app/curatedverdict/")
    page.click("text=Review queue")
    expect(page.locator("#review-count")).to_have_text("1 item to review.")
    item = page.locator("fieldset.review-item", has_text=SPLIT_TRUTH)
    expect(item.locator("h2")).to_contain_text("split vote")
    expect(item.locator("tr.judgement")).to_contain_text("match")
    # The evidence, visible without another click: the truth finding's description, the batch
    # of scanner findings the judge was shown, and why each vote said what it said.
    expect(item.locator(".truth-description")).to_have_text(SPLIT_DESCRIPTION)
    expect(item.locator(".truth-description")).to_be_visible()
    findings = item.locator(".batch[data-batch='1'] tr.scan-finding")
    expect(findings).to_have_count(2)
    expect(findings.nth(1)).to_contain_text("Reentrancy when withdrawing")
    for text in SCAN_DESCRIPTIONS:
        expect(item.locator(".scan-description", has_text=text)).to_be_visible()
    votes = item.locator(".batch[data-batch='1'] li.vote")
    expect(votes).to_have_count(3)
    expect(votes.nth(1)).to_contain_text("none — fake none, vote 2")
    expect(votes.nth(2)).to_contain_text("match (scan finding #1) — fake split, vote 3")
    expect(item.locator(".judgement-evidence summary a")).to_have_attribute(
        "href", f"/runs/{run.pk}/"
    )
    screenshot("queue")
    # The scan finding the judge matched is about something else: the correct verdict is none.
    item.locator("input[name=verdict][value=none]").check()
    item.locator("input[name=note]").fill("the matched finding is a different bug")
    item.locator("input[type=submit][value=Settle]").click()
    expect(page.locator(".messagelist")).to_contain_text("Recorded 'none'")
    expect(page.locator("#review-count")).to_have_text("0 items to review.")

    page.goto(judge_page)
    expect(row.locator(".agreement-n")).to_have_text("2")
    expect(row.locator(".agreement-accuracy")).to_contain_text("0.500")
    # The confusion matrix as a heat map: the settled item is curated none, judged match.
    heat = page.locator("table.confusion-heatmap[data-benchmark=audit]")
    expect(heat.locator("td[data-curated=none][data-judge=match]")).to_have_text("1")
    expect(heat.locator("td[data-curated=none][data-judge=none]")).to_have_text("1")
    screenshot("judge")
    # The verdict is kept with its author in the curated verdicts' list.
    page.goto("/admin/benchmarks_app/curatedverdict/?verdict=none")
    expect(page.locator("#result_list")).to_contain_text("maintainer")
