"""A bundle of an LLM-judged audit run: the prompts and answers of public truth travel, those
that quote hidden truth do not, and a failed-then-resumed run still re-scores offline."""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import pytest

from benchmarks_app.models import JudgeCall, Repo, Scanner, TruthFinding
from benchmarks_app.selectors.run_bundles import WITHHELD, run_bundle
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_resume, run_wait
from scoring import bundles
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, audit_choices, completion, error_body

pytestmark = pytest.mark.django_db

HIDDEN_TITLE = "Reentrancy in hiddenVault QZX"
HIDDEN_DESCRIPTION = "HIDDEN-DESCRIPTION-QZX: the callback re-enters before the balance update"
PUBLIC_TITLE = "Reentrancy in publicPool PLK"


def _echoing_judge(body: dict[str, Any]) -> Any:
    """Matches a truth to the scan finding sharing its first word, and quotes the truth's
    title in its explanation (as real models do): the answer is as secret as the truth."""
    user = body["messages"][1]["content"]
    truth = re.search(r"<verified_finding>\s*Title: (.*)", user).group(1)  # type: ignore[union-attr]
    index = next(
        (i for i, title in audit_choices(user) if truth.split()[0].lower() in title.lower()),
        -1,
    )
    answer = {
        "is_match": index >= 0,
        "is_partial_match": False,
        "explanation": f"The finding describes {truth!r}." if index >= 0 else f"Not {truth!r}.",
        "severity_from_junior_auditor": "High",
        "severity_from_truth": "High",
        "index_of_finding_from_junior_auditor": index,
    }
    return completion(json.dumps(answer), tokens_in=100, tokens_out=20)


def test_llm_run_bundle_withholds_hidden_prompts_and_verifies_after_a_resume(
    openai_settings: Any,
) -> None:
    hidden, _ = repo_with_scan(
        truths=[HIDDEN_TITLE, "Oracle staleness QZX"],
        findings=["Reentrancy when withdrawing", "Unrelated gas issue"],
    )
    TruthFinding.objects.filter(repo=hidden, order=0).update(description=HIDDEN_DESCRIPTION)
    public, _ = repo_with_scan(
        truths=[PUBLIC_TITLE, "Rounding in shares PLK"],
        findings=["Reentrancy in pool", "Rounding error", "Info"],
        qa=(2,),
    )
    Repo.objects.filter(pk=hidden.pk).update(is_public=False)
    Repo.objects.filter(pk=public.pk).update(is_public=True)
    publish_dataset(hidden, public)
    state = {"down": True}

    def handler(body: dict[str, Any]) -> Any:
        if state["down"] and f"Title: {PUBLIC_TITLE}" in body["messages"][1]["content"]:
            return 503, error_body("overloaded")
        return _echoing_judge(body)

    with FakeOpenAI(handler) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        scanner = Scanner.objects.get(name="tool")
        run = run_wait(run=audit_run_create(scanner=scanner, judge="openai"))
        assert run.status == "failed"
        # A failed run's bundle re-scores too: its unjudged truth findings are not misses.
        interrupted = bundles.read_bundle(run_bundle(run=run))
        checks = bundles.verify(interrupted)
        assert checks and all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
        assert any(c.name.endswith(" judge_failed") and c.stored == 1 for c in checks)
        state["down"] = False
        run = run_wait(run=run_resume(run=run))
    assert run.status == "succeeded" and run.is_complete

    data = run_bundle(run=run)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {name: archive.read(name).decode() for name in archive.namelist()}
    everything = "\n".join(members.values())
    for secret in (HIDDEN_TITLE, HIDDEN_DESCRIPTION, "Oracle staleness QZX"):
        assert secret not in everything
    # The public repo's questions and answers are there, as asked and as answered.
    prompts = json.loads(members[bundles.PROMPTS])
    assert prompts and all(
        PUBLIC_TITLE in p["user"] or "PLK" in p["user"] for p in prompts.values()
    )
    calls = json.loads(members[bundles.CALLS])
    assert len(calls) == JudgeCall.objects.filter(run=run).count()
    shown = [c for c in calls if c["prompt_key"] in prompts]
    assert any(PUBLIC_TITLE in c["raw_response"] for c in shown)
    withheld = [c for c in calls if c["prompt_key"] not in prompts]
    assert withheld and all(c["raw_response"] in ("", WITHHELD) for c in withheld)
    assert any(c["status"] == "error" for c in calls)  # the outage is on record
    # The API key's variable travels, never a key.
    assert "test-key" not in everything

    # Failed attempts and their later verdicts both travel; the verdicts count.
    bundle = bundles.read_bundle(data)
    outcomes = [r["outcome"] for r in bundle.get(bundles.VERDICTS)["truth_results"]]
    assert "judge_failed" in outcomes and "match" in outcomes
    checks = bundles.verify(bundle)
    assert checks and all(c.ok for c in checks), [c.line() for c in checks if not c.ok]
