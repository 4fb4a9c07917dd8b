"""A probe model name that looks like another's is theirs (issue 11 item 8)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from benchmarks_app.models import ResponseSubmission
from benchmarks_app.services.probes import ProbeOwnershipError
from tests.benchmarks_app.probes.conftest import GOOD, responses_jsonl

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("look_alike", ["g\u0440t-4", "GPT\u20104", "\uff47pt-4"])
def test_look_alike_of_a_curated_model_is_refused(suite, submit, look_alike: str) -> None:
    submit(suite_name="mini", model_name="gpt-4", text=responses_jsonl(GOOD))
    eve = get_user_model().objects.create_user("eve", password="pw")
    with pytest.raises(ProbeOwnershipError, match="maintained by the site's curators"):
        submit(suite_name="mini", model_name=look_alike, text=responses_jsonl(GOOD), owner=eve)
    assert list(ResponseSubmission.objects.values_list("model_name", flat=True)) == ["gpt-4"]


def test_a_distinct_name_is_accepted(suite, submit) -> None:
    submit(suite_name="mini", model_name="gpt-4", text=responses_jsonl(GOOD))
    eve = get_user_model().objects.create_user("eve", password="pw")
    submit(suite_name="mini", model_name="gpt-4-eve", text=responses_jsonl(GOOD), owner=eve)
    assert ResponseSubmission.objects.filter(model_name="gpt-4-eve", owner=eve).exists()
