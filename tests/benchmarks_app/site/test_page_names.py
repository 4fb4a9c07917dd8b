"""The two pages of one's submissions have names of their own (issue 26, item 15)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories.checklist import MembershipFactory

pytestmark = pytest.mark.django_db


def _names(page: str) -> tuple[str, str]:
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    h1 = re.search(r"<h1>(.*?)</h1>", page, re.S)
    assert title and h1
    return title.group(1).strip(), re.sub(r"<[^>]+>", "", h1.group(1)).strip()


def test_all_submissions_and_team_entries_are_named_apart(client) -> None:
    m = MembershipFactory()
    client.force_login(m.user)
    runs = client.get(reverse("runs:mine")).content.decode()
    team = client.get(reverse("checklist:mine")).content.decode()
    runs_title, runs_h1 = _names(runs)
    team_title, team_h1 = _names(team)
    assert runs_h1 == "My submissions (all benchmarks)"
    assert team_h1 == "Your team's checklist entries"
    assert runs_title != team_title and runs_h1 != team_h1
    # Only the site's menu says "My submissions"; the checklist's own links say "Team entries".
    assert team.count(">My submissions<") == 1 and ">Team entries<" in team
