"""An audit run whose LLM judge splits its votes on one truth finding (a real run, with the real
``openai`` client against the local fake server): the review queue's contested item."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from benchmarks_app.models import EvaluationRun, Scanner
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

SPLIT_TRUTH = "Reentrancy in withdraw"
PLAIN_TRUTH = "Oracle staleness"


class SplittingJudge:
    """Answers match, none, match to the successive votes on the reentrancy truth (a 2-1
    split the majority settles as a match) and none to everything else."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][1]["content"]
        truth = re.search(r"Title: (.*)", user).group(1)  # type: ignore[union-attr]
        with self.lock:
            self.asked[truth] += 1
            nth = self.asked[truth]
        match = truth.startswith("Reentrancy") and nth != 2
        return completion(
            json.dumps(
                {
                    "is_match": match,
                    "is_partial_match": False,
                    "explanation": "fake split" if match else "fake none",
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
    publish_dataset(repo)
    with FakeOpenAI(SplittingJudge()) as server:
        settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="openai")
        run = run_wait(run=run)
    assert run.status == "succeeded", run.error
    return run
