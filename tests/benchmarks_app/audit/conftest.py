"""Fixtures shared by the audit tests: users, and the fake judge behind a local server."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.scoring.judges.fake_openai import audit_choices, completion


def fake_verdict(body: dict[str, Any]) -> dict[str, Any]:
    """Match 'reentrancy' truths to the finding titled 'reentrancy ...', else neither."""
    user = body["messages"][1]["content"]
    # The verified finding's own block, wherever the prompt version puts it.
    verified = re.search(r"<verified_finding>\s*Title: (.*)", user)
    truth_title = verified.group(1)  # type: ignore[union-attr]
    for index, title in audit_choices(user):
        if truth_title.split()[0].lower() in title.lower():
            verdict = {"is_match": True, "is_partial_match": False, "index": int(index)}
            break
    else:
        verdict = {"is_match": False, "is_partial_match": False, "index": -1}
    return completion(
        json.dumps(
            {
                "is_match": verdict["is_match"],
                "is_partial_match": verdict["is_partial_match"],
                "explanation": "fake",
                "severity_from_junior_auditor": "High",
                "severity_from_truth": "High",
                "index_of_finding_from_junior_auditor": verdict["index"],
            }
        ),
        tokens_in=100,
        tokens_out=20,
    )


@pytest.fixture
def openai_settings(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_BACKOFF_MAX_S = 0.002
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []  # any model: the fake server answers for all of them
    return settings


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("participant", password="pw")


@pytest.fixture
def staff(db: Any) -> Any:
    return get_user_model().objects.create_user("curator", password="pw", is_staff=True)


def publish_dataset(*repos: Any, slug: str = "ds") -> Any:
    """A dataset of ``repos`` with its first release published (and official), as the first
    ``import_audit --dataset`` makes it; runs on these repos then count on its boards."""
    from benchmarks_app.services.audit import audit_dataset_get_or_create
    from benchmarks_app.services.audit.datasets import audit_dataset_add_repos

    dataset, _ = audit_dataset_get_or_create(slug=slug)
    return audit_dataset_add_repos(dataset=dataset, repos=list(repos))
