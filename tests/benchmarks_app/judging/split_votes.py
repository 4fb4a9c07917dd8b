"""An audit run whose LLM judge splits its votes on one truth finding (a real run, with the real
``openai`` client against the local fake server): the review queue's contested item."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from benchmarks_app.models import EvaluationRun, Scanner, ScanResult, TruthFinding
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.audit.importing import stored_findings_hash
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

SPLIT_TRUTH = "Reentrancy in withdraw"
PLAIN_TRUTH = "Oracle staleness"
# What a maintainer reads in the review queue to decide the split item.
SPLIT_DESCRIPTION = (
    "Vault.withdraw sends ether before zeroing the balance, so it can be re-entered."
)
SCAN_DESCRIPTIONS = [
    "A loop in Vault.sweep reads storage on every pass.",
    "The withdraw path of Vault calls out before updating state.",
]


class SplittingJudge:
    """Answers match, none, match to votes 1, 2 and 3 on the reentrancy truth (a 2-1 split the
    majority settles as a match) and none to everything else."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][1]["content"]
        truth = re.search(r"<verified_finding>\s*Title: (.*)", user).group(1)  # type: ignore[union-attr]
        with self.lock:
            self.asked[truth] += 1
            # The vote comes with its seed (seed 0 + vote number): votes are sent at once, and
            # on a busy machine they arrive in any order, so the count would give vote 2 the
            # answer meant for vote 1.
            nth = int(body["seed"]) if "seed" in body else self.asked[truth]
        match = truth.startswith("Reentrancy") and nth != 2
        return completion(
            json.dumps(
                {
                    "is_match": match,
                    "is_partial_match": False,
                    "explanation": (
                        f"fake split, vote {nth}" if match else f"fake none, vote {nth}"
                    ),
                    "severity_from_junior_auditor": "High",
                    "severity_from_truth": "High",
                    "index_of_finding_from_junior_auditor": 1 if match else -1,
                }
            )
        )


def split_vote_run(settings: Any) -> EvaluationRun:
    """A finished ``openai`` run on a fresh repo whose reentrancy truth got a split vote."""
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    settings.JUDGE_ITERATIONS = 3
    repo, _ = repo_with_scan(
        truths=[SPLIT_TRUTH, PLAIN_TRUTH],
        findings=["Unrelated gas issue", "Reentrancy when withdrawing"],
    )
    TruthFinding.objects.filter(repo=repo, title=SPLIT_TRUTH).update(description=SPLIT_DESCRIPTION)
    scan = ScanResult.objects.get(repo=repo)
    for index, text in enumerate(SCAN_DESCRIPTIONS):
        scan.findings.filter(index=index).update(description=text)
    scan.content_hash = stored_findings_hash(scan)  # as an import of these findings stores it
    scan.save(update_fields=["content_hash"])
    publish_dataset(repo)
    with FakeOpenAI(SplittingJudge()) as server:
        settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="openai")
        run = run_wait(run=run)
    assert run.status == "succeeded", run.error
    return run
