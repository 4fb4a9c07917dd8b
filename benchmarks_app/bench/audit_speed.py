"""Audit judging speed: the sequential schedule against the concurrent one (issue 14).

The bench starts its own OpenAI-compatible fake judge on 127.0.0.1: every answer takes
``LATENCY_S`` (200 ms) and says what the recorded o4-mini verdicts imply (``recorded/``: the
recorded finding, when it is in the batch; neither otherwise). The three repos without a
recording get the offline judge's verdicts instead (:func:`stand_in_verdicts`), so that every
repo's pools shrink as a real run's do. The ``openai`` audit judge talks to it over HTTP,
through the verdict cache and the call ledger (in memory), on the 11 bundled repos with the
``baseline`` scanner.

Printed side by side, all on the same fake judge:

* reference: repos one after another, truth findings one after another, votes 1 and 2 of a
  batch together (the reference pipeline's schedule); run for real unless
  ``AUDIT_SPEED_REFERENCE=rounds``, which counts its dependent rounds times the latency;
* sequential: this project's schedule before issue 14 (repos side by side, each repo's truth
  findings one after another), ``JUDGE_CONCURRENCY`` = ``AUDIT_SPEED_CONCURRENCY`` (32);
* concurrent: :func:`scoring.audit.schedule.match_repo_concurrent`, same concurrency;
* the same through the database: an ``openai`` run processed by the service path (one queue
  piece per repo, side by side, with the database cache, single flight and call ledger) on a
  throw-away SQLite database (:mod:`._audit_speed_db`);

with calls, wall time, calls per truth finding, the ratios and whether the verdicts (outcomes,
votes, explanations) are identical. Then the optional pre-filter on the recorded verdicts
(replay judge, no latency): calls saved and verdicts that differ from the full schedule.

The fake judge is :mod:`benchmarks_app.bench.recorded_judge`; this module runs the schedules
against it and prints the columns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from benchmarks_app.bench._audit_speed_db import DbColumn, memory_verdicts, run_db_column
from benchmarks_app.bench.recorded_judge import (
    CACHED_PROMPTS,
    DATA,
    LATENCY_S,
    LocalRecorded,
    RecordedJudgeServer,
    Repo,
    bundled_repos,
)
from scoring.audit.judges import OpenAIAuditJudge, ReplayAuditJudge
from scoring.audit.matching import RepoMatch, match_repo
from scoring.audit.schedule import Prefilter, match_repo_concurrent, prefilter_ranking
from scoring.audit.types import NONE, TruthItem
from scoring.judges.llm import CallRecord, LLMConfig, MemoryJudgeCache


@dataclass
class Column:
    name: str
    seconds: float
    calls: int
    results: dict[str, RepoMatch]
    simulated: bool = False


Schedule = Callable[..., Awaitable[RepoMatch]]


def _shape(results: dict[str, RepoMatch]) -> Any:
    return {
        repo: ([asdict(o) for o in m.outcomes], m.final, m.false_positives, m.notes)
        for repo, m in results.items()
    }


def _judge(base_url: str, concurrency: int, records: list[CallRecord]) -> OpenAIAuditJudge:
    config = LLMConfig(model="o4-mini", api_key="bench", base_url=base_url, max_retries=2)
    return OpenAIAuditJudge(
        config=config,
        cache=MemoryJudgeCache(),
        record=records.append,
        concurrency=concurrency,
    )


def run_schedule(
    name: str, schedule: Schedule, repos: list[Repo], base_url: str, concurrency: int
) -> Column:
    """All repos side by side (each its own chain), on a fresh cache."""
    records: list[CallRecord] = []

    async def go() -> dict[str, RepoMatch]:
        judge = _judge(base_url, concurrency, records)
        try:
            matches = await asyncio.gather(*(schedule(judge, t, s) for _, t, s in repos))
        finally:
            await judge.aclose()
        return {repo: m for (repo, _, _), m in zip(repos, matches, strict=True)}

    start = time.perf_counter()
    results = asyncio.run(go())
    seconds = time.perf_counter() - start
    calls = sum(1 for r in records if r.status == "ok")
    return Column(name, seconds, calls, results)


def run_reference(server: RecordedJudgeServer, repos: list[Repo], *, simulate: bool) -> Column:
    """Repos one after another, truths one after another, votes 1 and 2 together.

    ``simulate``: the same answers without HTTP, timed as its dependent rounds x the latency.
    """
    records: list[CallRecord] = []
    rounds = 0

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.name, self.model = inner.name, inner.model

        async def judge(self, truth: TruthItem, batch: Any, *, vote_number: int) -> Any:
            nonlocal rounds
            if vote_number != 2:  # vote 2 runs beside vote 1: one round for both
                rounds += 1
            return await self.inner.judge(truth, batch, vote_number=vote_number)

    async def go() -> dict[str, RepoMatch]:
        inner: Any = (
            LocalRecorded(server, records) if simulate else _judge(server.base_url, 2, records)
        )
        judge = Counting(inner)
        out = {}
        try:
            for repo, truths, scans in repos:
                out[repo] = await match_repo(judge, truths, scans)
        finally:
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()
        return out

    start = time.perf_counter()
    results = asyncio.run(go())
    seconds = time.perf_counter() - start
    calls = sum(1 for r in records if r.status == "ok")
    if simulate:
        return Column("reference", rounds * server.latency_s, calls, results, simulated=True)
    return Column("reference", seconds, calls, results)


def prefilter_report(repos: list[Repo], out: TextIO, ks: tuple[int, ...] = (5, 10)) -> None:
    """Calls saved by ``--prefilter K`` and verdicts changed, with the recorded verdicts."""
    from scoring.audit.judges.offline import similarity_matrix

    recorded = [r for r in repos if (DATA / "recorded" / f"{r[0]}_results.json").is_file()]

    def run(k: int | None) -> tuple[int, dict[Any, tuple[str, int | None]]]:
        records: list[CallRecord] = []
        judge = ReplayAuditJudge(DATA / "recorded", cache=MemoryJudgeCache(), record=records.append)
        verdicts: dict[Any, tuple[str, int | None]] = {}

        async def go() -> None:
            for repo, truths, scans in recorded:
                judge.register(repo, truths, scans)
                order = None
                if k is not None:
                    ranking = prefilter_ranking(truths, scans, similarity_matrix(truths, scans))
                    order = Prefilter(k, ranking)
                m = await match_repo_concurrent(judge, truths, scans, order=order)
                for o in m.outcomes:
                    final = m.final[o.truth_key]
                    verdicts[o.truth_key] = (final, o.scan_index if final != NONE else None)

        asyncio.run(go())
        return sum(1 for r in records if r.status == "ok"), verdicts

    base_calls, base = run(None)
    n = len(base)
    out.write(
        f"pre-filter (replay of the recorded verdicts, {len(recorded)} repos, {n} truth "
        f"findings; full schedule {base_calls} calls):\n"
    )
    for k in ks:
        calls, got = run(k)
        differ = sum(1 for key in base if base[key] != got.get(key))
        out.write(
            f"  --prefilter {k}: {calls} calls ({100 * (base_calls - calls) / base_calls:.0f}% "
            f"fewer), verdicts differing from the full schedule: {differ}/{n}\n"
        )


def run(out: TextIO) -> None:
    for name in ("httpx", "httpx2", "httpcore", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)
    repos = bundled_repos()
    concurrency = int(os.environ.get("AUDIT_SPEED_CONCURRENCY", "32"))
    simulate = os.environ.get("AUDIT_SPEED_REFERENCE", "real") == "rounds"
    n_truths = sum(len(t) for _, t, _ in repos)
    with RecordedJudgeServer(repos) as server:
        out.write(
            f"fake judge {server.base_url}: {LATENCY_S * 1000:.0f} ms per call, recorded "
            f"verdicts; {len(repos)} repos, {n_truths} truth findings (baseline scanner)\n"
        )
        new = run_schedule("concurrent", match_repo_concurrent, repos, server.base_url, concurrency)
        db = run_db_column(server.base_url, concurrency, DATA)
        today = run_schedule("sequential", match_repo, repos, server.base_url, concurrency)
        reference = run_reference(server, repos, simulate=simulate)
        peak = server.max_in_flight
        parser = server.parser
    out.write(f"{'schedule':<34}{'calls':>7}{'wall s':>9}{'calls/truth':>13}\n")
    rows: list[tuple[str, Column | DbColumn]] = [
        (
            "reference (all sequential)" + (" *" if reference.simulated else ""),
            reference,
        ),
        (f"sequential, JUDGE_CONCURRENCY={concurrency}", today),
        (f"concurrent, JUDGE_CONCURRENCY={concurrency}", new),
        ("  the same through the database +", db),
    ]
    for label, col in rows:
        out.write(
            f"{label:<34}{col.calls:>7}{col.seconds:>9.1f}{col.calls / max(1, n_truths):>13.2f}\n"
        )
    out.write(
        "  + an openai run on a throw-away SQLite database: one queue piece per repo, side by "
        "side, with the database cache, single flight and ledger "
        f"({db.queries / max(1, db.calls):.1f} statements per call, {db.queries} in all)\n"
    )
    if reference.simulated:
        out.write(
            "  * simulated: dependent rounds x 200 ms (AUDIT_SPEED_REFERENCE=rounds); "
            "unset it to run the reference for real\n"
        )
    out.write(
        f"speed-up: x{reference.seconds / new.seconds:.1f} over the reference "
        f"(x{reference.seconds / db.seconds:.1f} through the database), "
        f"x{today.seconds / new.seconds:.1f} over the sequential schedule; "
        f"at most {peak} calls in flight\n"
    )
    identical = (
        _shape(today.results) == _shape(new.results) == _shape(reference.results)
        and memory_verdicts(new.results) == db.verdicts
    )
    out.write(f"verdicts identical (database run included): {'yes' if identical else 'NO'}\n")
    out.write(
        f"prompt tokens the fake judge found cached (the last {CACHED_PROMPTS} prompts' "
        f"longest shared prefix, all schedules): {parser.cached_tokens:,} of "
        f"{parser.prompt_tokens:,} ({parser.cached_share:.0%})\n"
    )
    most = max(new.calls, db.calls)
    out.write(
        f"calls: concurrent {new.calls} (database {db.calls}) vs sequential {today.calls} "
        f"({'no more' if most <= today.calls else 'MORE'})\n"
    )
    prefilter_report(repos, out)


def main() -> None:  # pragma: no cover - manual use
    import sys

    run(sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    main()
