"""The documented ways to run an audit, timed as a user runs them (issue 22).

``evaluate_audit --scanner baseline --judge openai --wait`` with ``JUDGE_CONCURRENCY=32``, run
as the real command in a subprocess against a throw-away SQLite database holding the bundled
data, asking the audit speed bench's fake judge (:class:`.recorded_judge.RecordedJudgeServer`,
200 ms per answer, a verdict for every truth finding of the 11 repos, found by matching the
prompt's verified finding to the recorded verdicts after tokenizing the whole prompt, as a
server parses it: CPU per call on the same cores as the run):

* ``--wait``, no worker: the command processes the run itself (with ``RUN_PROCESSES_HERE``
  processes: itself and one forked helper by default);
* ``--wait`` with one ``qcluster`` at its default settings (``Q_WORKERS=2``) started before:
  the command only watches while the cluster's workers process the run;

each against the reference schedule on the same fake (repos, truths and batches one after
another, votes 1 and 2 together; run for real unless ``AUDIT_SPEED_REFERENCE=rounds``).
Printed per path: the command's wall time (Python and Django start-up included), the run's
own time (created to finished) and its judging (the fake's first request to its last answer),
judge requests against the reference's, the ratio to the reference, wall and judging against
the chain floor (the longest repo's dependent rounds x 200 ms), and whether the per-repo
outcome counts equal the reference's.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from typing import Any, TextIO

from benchmarks_app.bench.audit_speed import run_reference
from benchmarks_app.bench.cluster import ROOT, Harness, _sqlite_copy
from benchmarks_app.bench.recorded_judge import (
    DATA,
    LATENCY_S,
    RecordedJudgeServer,
    Repo,
    bundled_repos,
)
from scoring.audit.matching import RepoMatch
from scoring.audit.schedule import match_repo_concurrent

COMMAND = ["manage.py", "evaluate_audit", "--scanner", "baseline", "--judge", "openai", "--wait"]
Counts = dict[str, dict[str, int]]


@dataclass
class PathResult:
    name: str
    wall_s: float
    run_s: float
    judging_s: float
    calls: int
    counts: Counts
    status: str


def _counts(results: dict[str, RepoMatch]) -> Counts:
    return {repo: dict(Counter(o.outcome for o in m.outcomes)) for repo, m in results.items()}


def chain_floor_rounds(server: RecordedJudgeServer, repos: list[Repo]) -> int:
    """The longest repo's chain of dependent judge rounds under the concurrent schedule.

    Counted on the fake's answers without HTTP, each answer taking one tick: a call's round
    is one more than the highest round answered when it was asked, and a repo's length is its
    last call's round. (Dividing the elapsed time by the tick instead counted the schedule's
    own CPU time between rounds too: 38 to 44 rounds for the same repos, with the load.)
    """
    from benchmarks_app.bench.recorded_judge import LocalRecorded

    # Far longer than the schedule's CPU time between an answer and the calls it lets go.
    tick = 0.05

    class Ticking(LocalRecorded):
        answered = 0  # the highest round answered so far
        longest = 0

        async def judge(self, truth: Any, batch: Any, *, vote_number: int) -> Any:
            round_ = self.answered + 1
            await asyncio.sleep(tick)
            self.answered = max(self.answered, round_)
            self.longest = max(self.longest, round_)
            return await super().judge(truth, batch, vote_number=vote_number)

    async def length(truths: Any, scans: Any) -> int:
        judge = Ticking(server, [])
        await match_repo_concurrent(judge, truths, scans)
        return max(1, judge.longest)

    async def longest() -> int:
        return max(await asyncio.gather(*(length(t, s) for _, t, s in repos)))

    return asyncio.run(longest())


def _env(h: Harness, server: RecordedJudgeServer) -> dict[str, str]:
    return {
        **h.env,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "bench",
        "JUDGE_MODELS": "o4-mini",
        "JUDGE_CONCURRENCY": "32",
        "JUDGE_MAX_RETRIES": "2",
        "JUDGE_TIMEOUT_S": "60",
        "JUDGE_PROBE": "0",
        "Q_WORKERS": "2",
    }


def _manage(env: dict[str, str], *args: str, timeout_s: float = 600) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=timeout_s,
    )
    return time.perf_counter() - started


_WAIT_FOR_CLUSTER = """
import django, sys, time
django.setup()
from benchmarks_app.services.runs import live_clusters
until = time.monotonic() + 120
while not live_clusters():
    if time.monotonic() > until:
        sys.exit("no live cluster after 120 s")
    time.sleep(0.2)
"""


def run_path(name: str, server: RecordedJudgeServer, *, cluster: bool) -> PathResult:
    """One documented path on a fresh database (no verdict cached)."""
    h = Harness("sqlite", lease_s=60, grace_s=30)
    try:
        _sqlite_copy(h._sqlite_template(), h.dir / "db.sqlite3")
        env = _env(h, server)
        _manage(env, "manage.py", "import_audit", str(DATA))
        if cluster:
            h.env = env
            h.start(1, wait=False)
            _manage(env, "-c", _WAIT_FOR_CLUSTER)
        before = server.calls
        server.span_reset()
        wall = _manage(env, *COMMAND)
        calls = server.calls - before
        run_s, counts, status = _read_run(h.dir / "db.sqlite3")
        return PathResult(name, wall, run_s, server.judging_s, calls, counts, status)
    finally:
        h.close()


def _read_run(path: Any) -> tuple[Any, ...]:
    with closing(sqlite3.connect(path)) as db:
        status, created, finished = db.execute(
            "SELECT status, julianday(created_at), julianday(finished_at) "
            "FROM benchmarks_app_evaluationrun ORDER BY id DESC LIMIT 1"
        ).fetchone()
        counts: Counts = {}
        for repo, outcome, n in db.execute(
            "SELECT r.project_id, t.outcome, COUNT(*) FROM benchmarks_app_audittruthresult t "
            "JOIN benchmarks_app_repo r ON r.id = t.repo_id GROUP BY 1, 2"
        ):
            counts.setdefault(repo, {})[outcome] = n
    run_s = (finished - created) * 86400 if finished and created else float("nan")
    return run_s, counts, status


def run(out: TextIO) -> None:
    repos = bundled_repos()
    simulate = os.environ.get("AUDIT_SPEED_REFERENCE", "real") == "rounds"
    load_before = os.getloadavg()[0]
    with RecordedJudgeServer(repos) as server:
        floor_rounds = chain_floor_rounds(server, repos)
        floor = floor_rounds * LATENCY_S
        out.write(
            f"fake judge {server.base_url}: {LATENCY_S * 1000:.0f} ms per answer, a verdict "
            f"for every truth finding of {len(repos)} repos ({server.recorded_repos} recorded, "
            f"the others the offline judge's); chain floor {floor_rounds} rounds = {floor:.1f} s\n"
        )
        paths = [
            run_path("--wait, no worker", server, cluster=False),
            run_path("--wait, one qcluster (Q_WORKERS=2)", server, cluster=True),
        ]
        before = server.calls
        reference = run_reference(server, repos, simulate=simulate)
        reference_calls = reference.calls if simulate else server.calls - before
    expected = _counts(reference.results)
    out.write(
        f"  the fake parsed every prompt as a server does (tokenized it, found its cached prefix, "
        f"matched its verified finding's text to the recorded verdicts): "
        f"{server.parser.cpu_ms_per_prompt:.1f} ms of CPU per prompt on these cores, "
        f"{server.parser.cached_share:.0%} of prompt tokens a prefix cache would hold\n"
    )
    out.write(
        f"{'path':<40}{'calls':>7}{'wall s':>9}{'run s':>8}{'judge s':>9}{'x ref':>7}"
        f"{'/floor':>8}{'judge/floor':>13}  same\n"
    )
    out.write(
        f"{'reference' + (' *' if simulate else ''):<40}{reference_calls:>7}"
        f"{reference.seconds:>9.1f}{'':>8}{'':>9}{1.0:>7.1f}{reference.seconds / floor:>8.1f}\n"
    )
    for p in paths:
        same = "yes" if p.counts == expected and p.status == "succeeded" else "NO"
        out.write(
            f"{p.name:<40}{p.calls:>7}{p.wall_s:>9.1f}{p.run_s:>8.1f}{p.judging_s:>9.1f}"
            f"{reference.seconds / p.wall_s:>7.1f}{p.wall_s / floor:>8.2f}"
            f"{p.judging_s / floor:>13.2f}  {same}"
            f"{'' if p.calls <= reference_calls else ' (MORE calls)'}\n"
        )
    out.write(
        "  wall s: the command in a subprocess, start-up included; run s: the run's created-to-"
        "finished; judge s: the fake judge's first request to its last answer; x ref: "
        "reference wall / path wall; /floor: path wall / chain floor; judge/floor: judge s / "
        "chain floor; calls: requests the fake answered (no more than the reference's, or "
        "MORE calls); same: per-repo outcome counts equal the reference's, run succeeded\n"
    )
    if simulate:
        out.write("  * simulated: dependent rounds x 200 ms (AUDIT_SPEED_REFERENCE=rounds)\n")
    # The figures are wall times on a machine others may share: say how busy it was.
    out.write(
        f"  conditions: {os.cpu_count()} CPUs, SQLite; 1-minute load average {load_before:.1f} "
        f"when the bench started, {os.getloadavg()[0]:.1f} when it ended (its own processes "
        "count too)\n"
    )


def main() -> None:  # pragma: no cover - manual use
    run(sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    main()
