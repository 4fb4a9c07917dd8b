"""Agreement figures where people read them: the board page, the API, the admin's queue."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from benchmarks_app.models import CuratedVerdict, JudgeRecord
from benchmarks_app.selectors.verdict_review_queue import review_queue
from tests.benchmarks_app.judging.split_votes import (
    SCAN_DESCRIPTIONS,
    SPLIT_DESCRIPTION,
    SPLIT_TRUTH,
    split_vote_run,
)

pytestmark = pytest.mark.django_db

REVIEW = "admin:benchmarks_app_curatedverdict_review"
SETTLE = "admin:benchmarks_app_curatedverdict_settle"


@pytest.fixture
def split_run(settings: Any) -> Any:
    settings.JUDGE_REVIEW_SAMPLE_RATE = 0.0
    return split_vote_run(settings)


def _note(client: Any) -> str:
    html = client.get(reverse("audit:leaderboard")).content.decode()
    found = re.search(r'<p class="[^"]*judge-agreement[^"]*".*?</p>', html, re.S)
    assert found is not None, "the board has no agreement note"
    return found.group(0)


def _settle(client: Any, item: Any, verdict: str, **extra: str) -> Any:
    data = {
        "benchmark": item.benchmark,
        "item_key": item.item_key,
        "item_label": item.item_label,
        "verdict": verdict,
        "note": "checked the diff",
        **extra,
    }
    return client.post(reverse(SETTLE), data)


def test_board_page_and_api_say_when_the_judge_has_too_few_curated_verdicts(
    client: Any, admin_client: Any, split_run: Any, settings: Any
) -> None:
    note = _note(client)
    assert "no curated verdict yet" in note and "fewer than 30" in note
    api = client.get(reverse("api:audit-leaderboard-agreement")).json()
    assert api["board"]["judge"] == "openai:fake-model"
    api = api["judge_agreement"]
    assert (api["n"], api["accuracy"], api["min_curated"]) == (0, None, 30)

    item = next(i for i in review_queue() if SPLIT_TRUTH in i.item_label)
    assert _settle(admin_client, item, "none").status_code == 302
    settings.JUDGE_AGREEMENT_MIN_CURATED = 1
    note = _note(client)
    assert "1 item, accuracy 0.000" in note and "fewer than" not in note
    api = client.get(reverse("api:audit-leaderboard-agreement")).json()["judge_agreement"]
    assert (api["n"], api["accuracy"]) == (1, 0.0)
    assert api["confusion"]["none"]["match"] == 1
    judge = client.get(reverse("api:judge-agreement"), {"judge": "openai"}).json()
    assert [(r["benchmark"], r["n"], r["accuracy"]) for r in judge["results"]] == [
        ("audit", 1, 0.0)
    ]


def test_review_queue_lists_the_split_vote_and_records_the_maintainers_verdict(
    admin_client: Any, admin_user: Any, split_run: Any
) -> None:
    html = admin_client.get(reverse(REVIEW)).content.decode()
    assert "1 item to review." in html and "split vote" in html and SPLIT_TRUTH in html
    item = review_queue()[0]
    response = _settle(admin_client, item, "match")
    assert response.status_code == 302
    verdict = CuratedVerdict.objects.get()
    assert (verdict.verdict, verdict.author, verdict.note) == (
        "match",
        admin_user,
        "checked the diff",
    )
    assert "0 items to review." in admin_client.get(reverse(REVIEW)).content.decode()
    # A form loaded before that verdict is refused, not recorded over it unseen.
    response = _settle(admin_client, item, "none")
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("changed meanwhile" in m for m in messages)
    assert CuratedVerdict.objects.count() == 1
    # The judge's admin page shows the figure.
    record = JudgeRecord.objects.get(name="openai")
    page = admin_client.get(reverse("admin:benchmarks_app_judgerecord_change", args=[record.pk]))
    row = re.search(r'<td class="agreement-accuracy">(.*?)</td>', page.content.decode())
    assert row is not None and row.group(1).startswith("1.000")


def test_a_queue_item_carries_its_evidence_and_is_decided_from_it(
    client: Any, split_run: Any
) -> None:
    # A maintainer: staff with the curated-verdict permissions, not a superuser.
    maintainer = get_user_model().objects.create_user("curator", password="pw", is_staff=True)
    maintainer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_curatedverdict", "add_curatedverdict"])
    )
    client.force_login(maintainer)
    html = client.get(reverse(REVIEW)).content.decode()
    items = re.findall(r'<fieldset class="module aligned review-item".*?</fieldset>', html, re.S)
    assert len(items) == 1
    item = items[0]
    # The truth finding: title and description.
    assert SPLIT_TRUTH in re.search(r'class="truth-title">(.*?)<', item).group(1)  # type: ignore[union-attr]
    description = re.search(r'class="truth-description"[^>]*>(.*?)</div>', item, re.S)
    assert description is not None and description.group(1) == SPLIT_DESCRIPTION
    # The batch the judge saw: both scan findings with their descriptions, then each vote with
    # its explanation (the 2-1 split: match, none, match).
    batch = re.search(r'<div class="batch" data-batch="1">(.*?)</ul>', item, re.S)
    assert batch is not None
    rows = re.findall(
        r'<tr class="scan-finding"><td>#(\d+)</td>.*?<strong>(.*?)</strong>', batch.group(1)
    )
    assert rows == [("0", "Unrelated gas issue"), ("1", "Reentrancy when withdrawing")]
    assert all(text in batch.group(1) for text in SCAN_DESCRIPTIONS)
    votes = re.findall(
        r'<li class="vote">Vote (\d): <strong>(\w+)</strong>(.*?)</li>', batch.group(1)
    )
    assert [(n, verdict) for n, verdict, _ in votes] == [
        ("1", "match"),
        ("2", "none"),
        ("3", "match"),
    ]
    assert "(scan finding #1)" in votes[0][2] and "fake split, vote 1" in votes[0][2]
    assert "fake none, vote 2" in votes[1][2] and "fake split, vote 3" in votes[2][2]
    # The run the judgement comes from is one click away.
    assert f'href="{reverse("runs:detail", args=[split_run.pk])}"' in item
    # Decided through the service, with the maintainer's name.
    queued = review_queue()[0]
    assert _settle(client, queued, "none").status_code == 302
    verdict = CuratedVerdict.objects.get()
    assert (verdict.verdict, verdict.author, verdict.item_key) == (
        "none",
        maintainer,
        queued.item_key,
    )
    assert "0 items to review." in client.get(reverse(REVIEW)).content.decode()


def test_a_judges_confusion_matrix_is_a_heat_map_in_its_admin_page(
    admin_client: Any, split_run: Any
) -> None:
    item = review_queue()[0]
    _settle(admin_client, item, "none")  # the judge said match: one disagreement
    record = JudgeRecord.objects.get(name="openai")
    page = admin_client.get(
        reverse("admin:benchmarks_app_judgerecord_change", args=[record.pk])
    ).content.decode()
    table = re.search(
        r'<table class="confusion-heatmap" data-benchmark="audit".*?</table>', page, re.S
    )
    assert table is not None
    cells = {
        (curated, judged): (int(count), alpha)
        for curated, judged, alpha, count in re.findall(
            r'data-curated="(\w+)" data-judge="(\w+)"[^>]*?'
            r"rgba\(32, 92, 160, ([\d.]+)\)[^>]*>(\d+)</td>",
            table.group(0),
        )
    }
    assert len(cells) == 9
    # The one item: curated none, judged match, the darkest cell; empty cells are blank.
    assert cells[("none", "match")] == (1, "0.90")
    assert {v for k, v in cells.items() if k != ("none", "match")} == {(0, "0")}
    assert "<script" not in table.group(0)


def test_only_maintainers_who_may_add_verdicts_settle(client: Any, split_run: Any) -> None:
    staff = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(reverse(REVIEW)).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_curatedverdict"))
    assert client.get(reverse(REVIEW)).status_code == 200
    item = review_queue()[0]
    assert _settle(client, item, "match").status_code == 403
    assert not CuratedVerdict.objects.exists()
    client.logout()
    assert _settle(client, item, "match").status_code == 302  # to the login page
    assert not CuratedVerdict.objects.exists()


def test_a_bad_verdict_is_named_and_nothing_recorded(admin_client: Any, split_run: Any) -> None:
    response = _settle(admin_client, review_queue()[0], "perhaps")
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("verdict: 'perhaps' is not one of match, partial, none" in m for m in messages)
    assert not CuratedVerdict.objects.exists()


def test_probe_board_agreement_endpoint_names_the_suite(client: Any) -> None:
    answer = client.get(reverse("api:probes-leaderboard-agreement"))
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == "suite"
    answer = client.get(reverse("api:probes-leaderboard-agreement"), {"suite": "nope"})
    assert answer.status_code == 404
    assert answer.json()["detail"] == "suite: no probe suite named 'nope'"


def test_a_hidden_phase_board_gives_no_agreement_until_revealed(client: Any) -> None:
    from benchmarks_app.models.audit import DatasetRelease
    from benchmarks_app.services.phases import phase_reveal
    from tests.benchmarks_app.audit.conftest import publish_dataset
    from tests.benchmarks_app.audit.test_phase_pages import HIT, _hidden_final, submitted
    from tests.factories.audit import RepoFactory, TruthFindingFactory

    repo: Any = RepoFactory(project_id="code4rena_vault_2025_01")
    TruthFindingFactory(repo=repo, title="Reentrancy in withdraw")
    publish_dataset(repo)
    phase = _hidden_final(DatasetRelease.objects.get(dataset__slug="ds"))
    entrant = get_user_model().objects.create_user("entrant", password="pw")
    entrant_client = type(client)()
    entrant_client.force_login(entrant)
    submitted(entrant_client, repo, [HIT])
    url = reverse("api:audit-leaderboard-agreement")
    assert client.get(url, {"phase": "final"}).json()["judge_agreement"] is None
    assert "judge-agreement" not in client.get("/audit/?phase=final").content.decode()
    phase_reveal(phase=phase)
    figures = client.get(url, {"phase": "final"}).json()["judge_agreement"]
    assert figures is not None and figures["judge"] == "offline" and figures["n"] == 0


def test_a_current_verdict_is_curated_again_from_its_page(
    admin_client: Any, admin_user: Any, split_run: Any
) -> None:
    item = review_queue()[0]
    _settle(admin_client, item, "match")
    first = CuratedVerdict.objects.get()
    page = admin_client.get(
        reverse("admin:benchmarks_app_curatedverdict_change", args=[first.pk])
    ).content.decode()
    assert 'id="curate-again"' in page and f'name="current" value="{first.pk}"' in page
    _settle(admin_client, item, "partial", current=str(first.pk))
    second = CuratedVerdict.objects.current().get()
    assert (second.verdict, second.supersedes_id, second.author) == (
        "partial",
        first.pk,
        admin_user,
    )
    page = admin_client.get(
        reverse("admin:benchmarks_app_curatedverdict_change", args=[first.pk])
    ).content.decode()
    assert 'id="curate-again"' not in page  # superseded: only the current one is curated again
