"""Speed of audit matching on the bundled data (no database, no network).

Figures: the offline judge on all 11 ``baseline`` repos (votes per second), the same again
served from the verdict cache (the ratio is what an unchanged re-run saves), and the replay
judge on the 8 recorded repos.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TextIO

from benchmarks_app.demo import SAMPLE_DATA
from scoring.audit.calibration import load_cases
from scoring.audit.folders import read_path
from scoring.audit.judges import OfflineAuditJudge, ReplayAuditJudge
from scoring.audit.matching import AuditJudge, match_repo
from scoring.audit.types import ScanItem, TruthItem
from scoring.judges.llm import CallRecord, MemoryJudgeCache

DATA = SAMPLE_DATA / "audit"


def _repos() -> list[tuple[str, list[TruthItem], list[ScanItem]]]:
    data = read_path(DATA)
    out = []
    for scan in data.scans:
        if scan.scanner != "baseline":
            continue
        truths, scans = data.match_items(scan)
        out.append((scan.project_id, truths, scans))
    return out


def _timed(judge: AuditJudge, repos: list[tuple[str, list[TruthItem], list[ScanItem]]]) -> float:
    async def go() -> None:
        await asyncio.gather(*(match_repo(judge, t, s) for _, t, s in repos))

    start = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - start


def run(out: TextIO) -> None:
    repos = _repos()
    cache = MemoryJudgeCache()
    records: list[CallRecord] = []
    judge = OfflineAuditJudge(cache=cache, record=records.append)
    start = time.perf_counter()
    for repo, truths, scans in repos:
        judge.register(repo, truths, scans)
    fit = time.perf_counter() - start
    cold = _timed(judge, repos)
    cold_votes = sum(1 for r in records if r.status == "ok")
    records.clear()
    warm = _timed(judge, repos)
    statuses = Counter(r.status for r in records)
    truth_count = sum(len(t) for _, t, _ in repos)
    out.write(f"offline judge, {len(repos)} repos, {truth_count} truth findings\n")
    out.write(f"  TF-IDF fit: {fit * 1000:.0f} ms\n")
    out.write(
        f"  cold: {cold:.2f} s, {cold_votes} votes, {cold_votes / cold:.0f} votes/s, "
        f"{truth_count / cold:.0f} truth findings/s\n"
    )
    out.write(
        f"  cached re-run: {warm:.2f} s, {statuses.get('cached', 0)} cache hits, "
        f"{statuses.get('ok', 0)} new votes; speed-up x{cold / warm:.1f}\n"
    )
    cases = load_cases(DATA)
    replay = ReplayAuditJudge(DATA / "recorded", cache=MemoryJudgeCache())
    for case in cases:
        replay.register(case.repo, case.truths)
    elapsed = _timed(replay, [(c.repo, c.truths, c.scans) for c in cases])
    n = sum(len(c.truths) for c in cases)
    out.write(f"replay judge, {len(cases)} repos, {n} truth findings: {elapsed:.2f} s\n")
