"""Boolean query parameters take 1/0, true/false, yes/no (any case) and refuse anything else
with a 400 naming the parameter (``?mine=1`` used to list everybody's runs)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.test import APIRequestFactory

from benchmarks_app.api.filters import parse_bool, query_bool
from benchmarks_app.models import RunStatus
from tests.factories.common import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs() -> dict[str, Any]:
    me, other = UserFactory.create(), UserFactory.create()
    return {
        "me": me,
        "mine": RunFactory.create(created_by=me, status=RunStatus.QUEUED),
        "theirs": RunFactory.create(created_by=other, status=RunStatus.SUCCEEDED, is_complete=True),
    }


def _ids(api: Any, query: str) -> set[int]:
    response = api.get(f"/api/runs/?{query}")
    assert response.status_code == 200, response.json()
    return {row["id"] for row in response.json()["results"]}


@pytest.mark.parametrize("word", ["1", "true", "TRUE", "yes", "Yes"])
def test_mine_accepts_every_true_word(api: Any, runs: dict[str, Any], word: str) -> None:
    api.force_authenticate(runs["me"])
    assert _ids(api, f"mine={word}") == {runs["mine"].pk}


@pytest.mark.parametrize("word", ["0", "false", "No"])
def test_false_words_filter_the_other_way(api: Any, runs: dict[str, Any], word: str) -> None:
    assert _ids(api, f"active={word}") == {runs["theirs"].pk}
    assert _ids(api, f"is_complete={word}") == {runs["mine"].pk}


def test_true_words_on_model_and_method_filters(api: Any, runs: dict[str, Any]) -> None:
    assert _ids(api, "active=1") == {runs["mine"].pk}
    assert _ids(api, "is_complete=1") == {runs["theirs"].pk}
    assert _ids(api, "active=") == {runs["mine"].pk, runs["theirs"].pk}  # empty: no filter


@pytest.mark.parametrize("name", ["mine", "active", "is_complete"])
@pytest.mark.parametrize("value", ["2", "maybe", "on", " true", "-1"])
def test_anything_else_is_a_400_naming_the_parameter(
    api: Any, runs: dict[str, Any], name: str, value: str
) -> None:
    api.force_authenticate(runs["me"])
    response = api.get("/api/runs/", {name: value})
    assert response.status_code == 400
    body = response.json()
    assert body["errors"][0]["field"] == name
    assert "1, 0, true, false, yes, no" in body["errors"][0]["reason"]


def test_the_helpers_for_other_modules() -> None:
    assert [parse_bool(v) for v in ("1", "0", "TRUE", "no", "", None)] == [
        True,
        False,
        True,
        False,
        None,
        None,
    ]
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool("y")
    factory = APIRequestFactory()
    from rest_framework.request import Request

    assert query_bool(Request(factory.get("/x", {"flag": "Yes"})), "flag") is True
    assert query_bool(Request(factory.get("/x")), "flag", default=False) is False
    with pytest.raises(ValidationError) as refused:
        query_bool(Request(factory.get("/x", {"flag": "perhaps"})), "flag")
    assert "flag" in refused.value.detail


def test_the_schema_documents_the_accepted_words(api: Any) -> None:
    schema = api.get("/api/schema/?format=json").json()
    params = {p["name"]: p for p in schema["paths"]["/api/runs/"]["get"]["parameters"]}
    for name in ("mine", "active", "is_complete"):
        assert params[name]["schema"]["type"] == "string"
        assert "[Tt][Rr][Uu][Ee]" in params[name]["schema"]["pattern"]
