"""Runs may only use the judge models the operator configured (JUDGE_MODELS)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks_app.services.audit import AuditRunError
from benchmarks_app.services.audit.runs import audit_run_create
from tests.factories.audit import repo_with_scan

pytestmark = pytest.mark.django_db


def test_openai_runs_are_limited_to_the_configured_models(settings: Any) -> None:
    settings.OPENAI_API_KEY = "sk-test"
    settings.JUDGE_MODELS = ["o4-mini", "gpt-4.1"]
    settings.JUDGE_MODEL = "o4-mini"
    scanner = repo_with_scan(truths=["Reentrancy"], findings=["Reentrancy in withdraw"])[1].scanner
    with pytest.raises(AuditRunError, match=r"model: 'gpt-9' is not one of .*o4-mini, gpt-4\.1"):
        audit_run_create(scanner=scanner, judge="openai", model="gpt-9", enqueue=False)
    run = audit_run_create(scanner=scanner, judge="openai", model="gpt-4.1", enqueue=False)
    assert run.judge_config["model"] == "gpt-4.1"
    default = audit_run_create(scanner=scanner, judge="openai", enqueue=False)
    assert default.judge_config["model"] == "o4-mini"
