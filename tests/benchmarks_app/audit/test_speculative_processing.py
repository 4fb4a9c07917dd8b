"""The concurrent schedule through the service path: one call at a time or eight, same run.

Two runs of the ``openai`` judge against the project's fake server, processed by the queue's
piece path (leases, database cache, single flight, ledger): ``JUDGE_CONCURRENCY`` 1, then 8
with the cache emptied in between (so that the second run asks everything again). The fake
answers after a few milliseconds that depend on the question, so at 8 the answers arrive in
another order. The stored results (outcome, scan finding, votes, explanation, notes) and the
ledger (per cache key: its votes, attempts, statuses and tokens) must be the same.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections import Counter
from typing import Any

import pytest

from benchmarks_app.models import (
    AuditTruthResult,
    EvaluationRun,
    JudgeCacheEntry,
    JudgeCall,
    Scanner,
)
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_pieces_prepare, run_process_here
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, audit_choices, completion

pytestmark = pytest.mark.django_db

# Truths named after a keyword: findings carrying it match; "near <keyword>" is a partial.
# Two truths want the "oracle" findings, so the second must find another one (one-to-one),
# and the third "fee" truth makes the votes disagree (a third vote is asked).
TRUTHS = [
    ["oracle stale price", "reentrancy in withdraw", "oracle again", "fee rounding", "unseen"],
    ["signature replay", "fee on transfer", "overflow in mint", "signature again"],
]
FINDINGS = [
    [f"gas note {i}" for i in range(23)],
    [f"style note {i}" for i in range(14)],
]
FINDINGS[0][3] = "oracle price is stale"
FINDINGS[0][12] = "near reentrancy: unchecked call"
FINDINGS[0][18] = "second oracle issue"
FINDINGS[0][21] = "reentrancy in withdraw"
FINDINGS[0][7] = "near fee: rounding down"
FINDINGS[1][2] = "signature can be replayed"
FINDINGS[1][11] = "signature malleability"
FINDINGS[1][5] = "near overflow"
FINDINGS[1][13] = "fee on transfer tokens"


def judge(body: dict[str, Any]) -> Any:
    user = body["messages"][1]["content"]
    truth = re.search(r"<verified_finding>\s*Title: (.*)", user).group(1)  # type: ignore[union-attr]
    keyword = truth.split()[0].lower()
    batch = [(i, t.lower()) for i, t in audit_choices(user)]
    vote = int(body.get("seed") or 0)
    # A few milliseconds that depend on the question: answers come back out of order.
    time.sleep((zlib.crc32(user.encode()) % 7) / 1000)
    exact = [i for i, t in batch if keyword in t and not t.startswith("near")]
    near = [i for i, t in batch if t.startswith(f"near {keyword}")]
    verdict = {"is_match": False, "is_partial_match": False, "index": -1, "why": "none"}
    if exact and not (keyword == "fee" and vote == 2):
        verdict = {"is_match": True, "is_partial_match": False, "index": exact[0], "why": "exact"}
    elif near or (exact and keyword == "fee"):
        index = near[0] if near else exact[0]
        verdict = {"is_match": False, "is_partial_match": True, "index": index, "why": "near"}
    content = {
        "is_match": verdict["is_match"],
        "is_partial_match": verdict["is_partial_match"],
        "explanation": f"{verdict['why']} for {truth} among {[i for i, _ in batch]}, vote {vote}",
        "severity_from_junior_auditor": "High",
        "severity_from_truth": "High",
        "index_of_finding_from_junior_auditor": verdict["index"],
    }
    return completion(json.dumps(content), tokens_in=len(user) // 4, tokens_out=vote + 5)


def _run(settings: Any, concurrency: int) -> tuple[EvaluationRun, int, int]:
    settings.JUDGE_CONCURRENCY = concurrency
    JudgeCacheEntry.objects.all().delete()  # the second run asks everything again
    with FakeOpenAI(judge, keep_alive=True) as server:
        settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(
            scanner=Scanner.objects.get(name="tool"),
            judge="openai",
            iterations=3,
            batch_size=5,
            enqueue=False,
        )
        run_pieces_prepare(run=run)
        run_process_here(run=run, raise_errors=True)
    run.refresh_from_db()
    return run, len(server.requests), server.max_in_flight


def _results(run: EvaluationRun) -> list[tuple[Any, ...]]:
    rows = AuditTruthResult.objects.filter(run=run).select_related(
        "repo", "truth_finding", "scan_finding"
    )
    return [
        (
            r.repo.project_id,
            r.truth_finding.finding_id,
            r.outcome,
            r.scan_finding.index if r.scan_finding else None,
            r.votes,
            r.explanation,
            r.notes,
        )
        for r in rows.order_by("repo__project_id", "truth_finding__order")
    ]


def _ledger(run: EvaluationRun) -> dict[str, Counter[tuple[Any, ...]]]:
    out: dict[str, Counter[tuple[Any, ...]]] = {}
    fields = ("prompt_hash", "vote_number", "attempt", "status", "tokens_in", "tokens_out")
    for key, *rest in JudgeCall.objects.filter(run=run).values_list(*fields):
        out.setdefault(key, Counter())[tuple(rest)] += 1
    return out


def test_concurrency_changes_neither_results_nor_ledger(openai_settings: Any) -> None:
    repos = [repo_with_scan(truths=t, findings=f)[0] for t, f in zip(TRUTHS, FINDINGS, strict=True)]
    publish_dataset(*repos)
    one, asked_one, width_one = _run(openai_settings, 1)
    eight, asked_eight, width_eight = _run(openai_settings, 8)
    assert one.status == eight.status == "succeeded"
    assert (width_one, width_eight > 1) == (1, True)
    results = _results(one)
    assert results == _results(eight)
    assert _ledger(one) == _ledger(eight)
    assert asked_one == asked_eight == JudgeCall.objects.filter(run=eight, status="ok").count()
    # The case is not trivial: matches (one taken from the next truth), partials, misses,
    # and batches where the votes disagreed (three votes).
    outcomes = {(r[0], r[1]): (r[2], r[3]) for r in results}
    first, second = sorted({r[0] for r in results})
    assert outcomes[(first, "F-0")] == ("match", 3)
    assert outcomes[(first, "F-2")] == ("match", 18)
    assert outcomes[(first, "F-1")] == ("match", 21)
    assert outcomes[(first, "F-4")] == ("none", None)
    assert outcomes[(second, "F-2")] == ("partial", 5)
    assert any(len({v["batch"] for v in r[4]}) > 1 for r in results)
    fee = next(r for r in results if (r[0], r[1]) == (second, "F-1"))
    assert fee[2:4] == ("match", 13)
    assert [v["verdict"] for v in fee[4] if v["batch"] == 3] == ["match", "partial", "match"]
