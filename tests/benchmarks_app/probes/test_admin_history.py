"""Curation history of pattern rules in the admin (django-simple-history)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks_app.models import PatternRule

pytestmark = pytest.mark.django_db


def _form(rule: PatternRule, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "kind": rule.kind,
        "label": rule.label,
        "regex": rule.regex,
        "weight": rule.weight,
        "failure_mode": rule.failure_mode,
        "description": rule.description,
    }
    if rule.active:
        data["active"] = "on"
    data.update(changes)
    return data


def test_an_admin_edit_of_a_rule_is_in_its_history_with_the_editor(admin_client, admin_user):
    rule = PatternRule.objects.order_by("pk").first()
    assert rule is not None
    old_weight = rule.weight
    response = admin_client.post(
        reverse("admin:benchmarks_app_patternrule_change", args=[rule.pk]),
        _form(rule, weight=old_weight + 1.25),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    latest = rule.history.order_by("-history_date", "-history_id").first()
    assert latest is not None
    assert latest.history_type == "~"
    assert latest.history_user == admin_user
    assert latest.weight == old_weight + 1.25
    # A second edit: the history tells the two apart, field by field.
    rule.refresh_from_db()
    admin_client.post(
        reverse("admin:benchmarks_app_patternrule_change", args=[rule.pk]),
        _form(rule, failure_mode="curated_mode"),
    )
    newest = rule.history.order_by("-history_date", "-history_id").first()
    assert newest is not None and newest.prev_record is not None
    assert newest.prev_record.weight == old_weight + 1.25
    assert [c.field for c in newest.diff_against(newest.prev_record).changes] == ["failure_mode"]

    history = admin_client.get(reverse("admin:benchmarks_app_patternrule_history", args=[rule.pk]))
    assert history.status_code == 200
    html = history.content.decode()
    assert admin_user.get_username() in html
    # The change page links to the history (SimpleHistoryAdmin's object tools).
    change = admin_client.get(reverse("admin:benchmarks_app_patternrule_change", args=[rule.pk]))
    assert reverse("admin:benchmarks_app_patternrule_history", args=[rule.pk]) in (
        change.content.decode()
    )


def test_a_refused_edit_leaves_no_history(admin_client):
    rule = PatternRule.objects.order_by("pk").first()
    assert rule is not None
    before = rule.history.count()
    response = admin_client.post(
        reverse("admin:benchmarks_app_patternrule_change", args=[rule.pk]),
        _form(rule, regex="(unclosed"),
    )
    assert response.status_code == 200  # the form again, with the error
    assert "Regex" in response.content.decode()
    assert rule.history.count() == before
    rule.refresh_from_db()
    assert rule.regex != "(unclosed"
