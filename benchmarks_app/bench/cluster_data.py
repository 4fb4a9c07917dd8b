"""The data of the cluster harness's scenarios (:mod:`.cluster`): seeded repos, truths and
scanner findings, runs created through the services, the judge's cache made cold, and the
wait for runs to end. Run inside the harness's database (Django set up by the caller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from random import Random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks_app.bench.cluster import Harness


def seed(scanners: dict[str, str], *, repos: int, truths: int, findings: int) -> None:
    """Repos ``r00``… with truths, and per scanner findings drawn from its variant (scanners
    of one variant have identical results); each scanner gets a ``~ref`` twin."""
    from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding

    for r in range(repos):
        repo, created = Repo.objects.get_or_create(
            project_id=f"r{r:02d}", defaults={"name": f"Repo {r}"}
        )
        if created:
            TruthFinding.objects.bulk_create(
                TruthFinding(
                    repo=repo,
                    finding_id=f"r{r:02d}-T{j}",
                    order=j,
                    severity="High",
                    title=f"w{r}x{j} p{r}x{j} flaw in Vault{j}",
                )
                for j in range(truths)
            )
        for name, variant in scanners.items():
            rng = Random(f"{variant}-{r}")
            titles = []
            for i in range(findings):
                j, roll = rng.randrange(truths), rng.random()
                word = f"w{r}x{j}" if roll < 0.35 else f"p{r}x{j}" if roll < 0.55 else f"n{i}"
                titles.append(f"{word} problem {i}")
            for scanner_name in (name, f"{name}~ref"):
                scanner, _ = Scanner.objects.get_or_create(name=scanner_name)
                result = ScanResult.objects.create(
                    scanner=scanner, repo=repo, content_hash=f"{variant}-{r}"
                )
                ScanFinding.objects.bulk_create(
                    ScanFinding(scan_result=result, index=i, title=t, severity="High")
                    for i, t in enumerate(titles)
                )


def create_runs(scanners: Iterable[str]) -> list[int]:
    from benchmarks_app.models import Scanner
    from benchmarks_app.services.audit import audit_run_create

    return [
        audit_run_create(scanner=Scanner.objects.get(name=name), judge="openai").pk
        for name in scanners
    ]


def cold_cache(h: Harness) -> None:
    """Forget every verdict and the judge's counts: what follows pays for every question."""
    from benchmarks_app.models import JudgeCacheEntry, JudgeInFlight

    JudgeCacheEntry.objects.all().delete()
    JudgeInFlight.objects.all().delete()
    h.judge.reset()


def wait_end(
    run_ids: list[int], timeout_s: float, watch: Callable[[], None] | None = None
) -> float | None:
    """Seconds until every run has ended (``None``: not within ``timeout_s``); reads only."""
    from benchmarks_app.models import EvaluationRun
    from benchmarks_app.models.runs import ACTIVE_STATUSES

    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if watch is not None:
            watch()
        if not EvaluationRun.objects.filter(pk__in=run_ids, status__in=ACTIVE_STATUSES).exists():
            return round(time.monotonic() - start, 1)
        time.sleep(0.5)
    return None
