"""The review queue of judges' judgements: the items without a curated verdict that a
maintainer should decide first (split votes, failed or invalid calls, partial matches, then a
seeded sample of the uncontested), and the evidence shown beside one page of them.

The judgements and their agreement with curated verdicts are :mod:`.judge_agreement`'s; this
module orders what is left undecided.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q

from benchmarks_app.models import (
    VERDICT_CLASSES,
    AuditTruthResult,
    Benchmark,
    EvaluationRun,
    ScanFinding,
)
from benchmarks_app.selectors.judge_agreement import (
    REASON_ORDER,
    SAMPLE,
    SPLIT_VOTE,
    Judgement,
    current_verdicts,
    judgements,
    latest_per_judge_item,
)

# The queue reads the judgements of this many latest runs of each benchmark.
QUEUE_RUNS = 50


@dataclass
class QueueItem:
    benchmark: str
    item_key: str
    item_label: str
    reasons: list[str]
    judgements: list[Judgement]
    classes: tuple[str, ...]
    # What a maintainer decides from, filled for one page of the queue (review_evidence).
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        return ", ".join(self.reasons)


def in_sample(item_key: str, *, rate: float, seed: int) -> bool:
    """Whether an uncontested item is in the review sample: a hash of the key and seed, so the
    same items are drawn on every page load and by every maintainer."""
    digest = hashlib.sha256(f"{seed}:{item_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def review_queue(*, benchmark: str | None = None, reason: str | None = None) -> list[QueueItem]:
    """Items without a curated verdict whose judgements are contested (split votes, failed or
    invalid calls, partial matches, judges that disagree), then a seeded sample of the rest."""
    runs = EvaluationRun.objects.filter(benchmark__in=list(VERDICT_CLASSES))
    if benchmark:
        runs = runs.filter(benchmark=benchmark)
    recent: list[int] = []
    for name in VERDICT_CLASSES:
        recent += list(
            runs.filter(benchmark=name).order_by("-id").values_list("id", flat=True)[:QUEUE_RUNS]
        )
    found = latest_per_judge_item(judgements(EvaluationRun.objects.filter(pk__in=recent)))
    settled = {key for key in current_verdicts(benchmark)}
    items: dict[tuple[str, str], QueueItem] = {}
    for j in found:
        key = (j.benchmark, j.item_key)
        if key in settled:
            continue
        item = items.get(key)
        if item is None:
            item = items[key] = QueueItem(
                j.benchmark, j.item_key, j.item_label, [], [], VERDICT_CLASSES[j.benchmark]
            )
        item.judgements.append(j)
        for r in j.reasons:
            if r not in item.reasons:
                item.reasons.append(r)
    rate, seed = float(settings.JUDGE_REVIEW_SAMPLE_RATE), int(settings.JUDGE_REVIEW_SEED)
    queue = []
    for item in items.values():
        labels = {j.label for j in item.judgements if j.label is not None}
        if len(labels) > 1 and SPLIT_VOTE not in item.reasons:
            item.reasons.insert(0, SPLIT_VOTE)  # judges that disagree split the vote too
        if not item.reasons and in_sample(item.item_key, rate=rate, seed=seed):
            item.reasons.append(SAMPLE)
        if item.reasons and (reason is None or reason in item.reasons):
            item.reasons.sort(key=REASON_ORDER.index)
            item.judgements.sort(key=lambda j: (j.judge, j.run_id))
            queue.append(item)
    queue.sort(key=lambda i: (REASON_ORDER.index(i.reasons[0]), i.benchmark, i.item_key))
    return queue


def _finding(row: dict[str, Any] | None, index: int) -> dict[str, Any]:
    if row is None:  # a scan result's findings are never deleted alone; kept readable anyway
        return {"index": index, "title": "(no longer stored)", "severity": "", "description": ""}
    return {
        "index": index,
        "title": row["title"],
        "severity": row["severity"],
        "description": row["description"],
    }


def review_evidence(items: Iterable[QueueItem]) -> None:
    """Fill in what a maintainer needs to decide each audit item of ``items`` (one page of the
    queue, so the texts are read for 50 items, not the whole queue): the truth finding's title
    and description, and per judgement each batch the judge was asked about, with its scan
    findings and every vote with its explanation.

    Votes stored before runs kept their batch (``seen``) name only the finding they chose: such
    a batch lists those, and says that the rest of it is not known.
    """
    items = [i for i in items if i.benchmark == Benchmark.AUDIT]
    wanted = [j for i in items for j in i.judgements if "result_id" in j.detail]
    if not wanted:
        return
    rows: dict[int, dict[str, Any]] = {
        r["id"]: dict(r)
        for r in AuditTruthResult.objects.filter(pk__in=[j.detail["result_id"] for j in wanted])
        .values(
            "id",
            "explanation",
            "votes",
            "truth_finding__title",
            "truth_finding__description",
            "truth_finding__severity",
        )
        .iterator()
    }
    needed: dict[int, set[int]] = defaultdict(set)
    for j in wanted:
        for vote in (rows.get(j.detail["result_id"]) or {}).get("votes") or []:
            named = [int(i) for i in vote.get("seen") or []]
            if vote.get("index") is not None and int(vote["index"]) >= 0:
                named.append(int(vote["index"]))
            needed[j.detail["scan_result_id"]].update(named)
    findings: dict[tuple[int, int], dict[str, Any]] = {}
    if needed:
        wanted_findings = Q()
        for scan_result, wanted_indices in needed.items():
            wanted_findings |= Q(scan_result_id=scan_result, index__in=sorted(wanted_indices))
        for f in ScanFinding.objects.filter(wanted_findings).values(
            "scan_result_id", "index", "title", "severity", "description"
        ):
            findings[(f["scan_result_id"], f["index"])] = dict(f)
    for item in items:
        for j in item.judgements:
            row = rows.get(j.detail.get("result_id", -1))
            if row is None:
                continue
            if not item.evidence:
                item.evidence = {
                    "truth_title": row["truth_finding__title"],
                    "truth_description": row["truth_finding__description"],
                    "truth_severity": row["truth_finding__severity"],
                }
            scan_result = j.detail["scan_result_id"]
            batches: dict[int, dict[str, Any]] = {}
            for vote in row["votes"] or []:
                number = int(vote.get("batch") or 0)
                batch = batches.setdefault(
                    number,
                    {"batch": number, "votes": [], "indices": [], "complete": "seen" in vote},
                )
                named = vote.get("index")
                for index in [*(vote.get("seen") or []), named]:
                    if index is not None and int(index) >= 0 and index not in batch["indices"]:
                        batch["indices"].append(int(index))
                batch["votes"].append(
                    {
                        "vote": vote.get("vote"),
                        "verdict": str(vote.get("verdict") or "failed"),
                        "index": named if named is not None and int(named) >= 0 else None,
                        "explanation": str(vote.get("explanation") or ""),
                        "error": str(vote.get("error") or ""),
                    }
                )
            for batch in batches.values():
                batch["findings"] = [
                    _finding(findings.get((scan_result, i)), i) for i in batch.pop("indices")
                ]
            j.detail["explanation"] = row["explanation"]
            j.detail["batches"] = [batches[b] for b in sorted(batches)]
