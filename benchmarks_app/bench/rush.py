"""The deadline rush (issue 35): the documented production set-up, started here and driven by
a Locust crowd (``make bench BENCH=rush``, or ``python -m benchmarks_app.bench.rush``).

The bench starts the site the way README's "Production" section says to run it
(:mod:`._rush_site`), ignoring the throwaway database and ``Q_SYNC=1`` that ``make bench``
gives the other benches:

- PostgreSQL + Redis when both answer on 127.0.0.1 (a database of its own,
  ``evalplatform_rush``, dropped at the end, and Redis database ``RUSH_REDIS_DB``, default 13,
  whose keys it deletes at the end), else SQLite + django-q2's ORM broker (``RUSH_DB=sqlite``
  or ``postgres`` forces one);
- ``DEBUG=0``, static files collected, the offline judge;
- ``gunicorn -c config/gunicorn.conf.py config.wsgi`` (workers and threads from the CPU count;
  ``GUNICORN_*`` and ``MALLOC_*`` variables of the caller reach it), two ``manage.py
  qcluster`` and one ``manage.py webhook_qcluster``, each in a process group of its own
  (stopped however the bench ends).

It seeds (:mod:`._rush_seed`, through the project's commands and services) the demo's audit and
probe data (``demo_setup --skip checklist``: the papers are the participants'), an open probe
phase with a daily limit, and per load run fresh accounts (participants in checklist teams, API
clients, hostile accounts, each with a token; one password for all). Then, per user count, it
runs Locust (:mod:`._rush_users`) headless for ``RUSH_SECONDS`` twice: first without the
hostile accounts (the same readers, participants and API clients: the user count less the
hostile accounts), then with them. During each load it samples the serving processes' memory
(:mod:`._rush_memory`: gunicorn master and workers, RSS, PSS and private memory) every
``RUSH_RSS_EVERY_S`` seconds, and after it waits up to ``RUSH_DRAIN_S`` for the submitted runs
to end. It prints (:mod:`._rush_report`) per load and request kind: count, p50/p95/p99 (ms) and
the answers by outcome (``refused``: a 4xx the visitor expected, a quota's 429 or a hostile
file's 400; ``busy``: 503 with Retry-After from the site's reader caps, which participants
honour; ``errors``: answers nobody expected; ``5xx``: every other server error; no answer);
runs finished vs submitted; quota counts; memory over time and per worker; then each kind's
p95 with / without the hostile accounts and their ratio, and one goal line per user count.

The goal (issue 35's done-when): p95 of board pages and the board API under 200 ms, of other
pages and API reads under 500 ms; no 5xx, error or unanswered request anywhere; "busy" only on
requests that read a file; every submitted run ended and succeeded; quotas exact; no kind's p95
(but the hostile uploads' and the logins') over 1.5x its p95 without the hostile accounts
(kinds with fewer than ``RUSH_COMPARE_MIN_REQUESTS`` requests in either load are shown, not
judged); and memory flat after warm-up (no worker serving through the last third of a load
grew more than ``RUSH_FLAT_MIB`` MiB of RSS in it). The command exits 1 when the goal was
missed (in a sweep: when no user count held it), so ``make rush`` fails then.

Settings (environment): ``RUSH_USERS`` (100), ``RUSH_SECONDS`` (300, each load),
``RUSH_PARTICIPANTS`` (20), ``RUSH_API_CLIENTS`` (5), ``RUSH_HOSTILE`` (3), ``RUSH_SPAWN_RATE``
(users started per second, 10), ``RUSH_THINK_S`` (readers' pause between requests, "2,10" s),
``RUSH_COMPARE`` (1; 0: only the load with the hostile accounts, no ratio),
``RUSH_COMPARE_MIN_REQUESTS`` (20), ``RUSH_FLAT_MIB`` (16), ``RUSH_SWEEP`` (e.g. "50,100,150":
the loads per user count, the largest that held the goal is reported), ``RUSH_DB``,
``RUSH_REDIS_DB``, ``RUSH_DRAIN_S`` (120), ``RUSH_QUOTA_AUDIT`` (5 a day),
``RUSH_QUOTA_PROBES`` (3), ``RUSH_QUOTA_PAPERS`` (3), ``RUSH_DEMO=0`` (seed without the demo's
runs: faster, for the smoke test), ``RUSH_JSON`` (a file to write every figure to),
``RUSH_KEEP_LOGS`` (a folder to copy the site's logs to before they are deleted),
``RUSH_LOG_LEVEL`` (the site's, WARNING; INFO shows gunicorn's worker restarts),
``RUSH_GUNICORN_CONFIG`` (another config file, for experiments). Load runs of one invocation
share the site (each with accounts of its own), so a later run reads boards that the earlier
ones made longer: the load with the hostile accounts comes second, against the harder site.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from benchmarks_app.bench._rush_memory import MemorySampler, memory_summary
from benchmarks_app.bench._rush_report import (
    LoadResult,
    by_minute,
    print_goal,
    print_hostile_effect,
    print_load,
    quota_check,
    summarise,
)
from benchmarks_app.bench._rush_site import ROOT, Options, Site

USERS_FILE = Path(__file__).with_name("_rush_users.py")


def load(site: Site, fixture: dict[str, Any], index: int, users: int, hostile: bool) -> LoadResult:
    """One Locust load of ``users`` (without the hostile accounts: the same crowd less them)
    for ``RUSH_SECONDS``, its figures and the drain of the runs it submitted."""
    options = site.options
    crowd = options.crowd(users, hostile)
    report_path = site.dir / f"report-{index}.json"
    fixture_path = site.dir / "fixture.json"
    fixture_path.write_text(json.dumps(fixture))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RUSH_")},
        "PYTHONPATH": str(ROOT),
        "RUSH_FIXTURE": str(fixture_path),
        "RUSH_REPORT": str(report_path),
        "RUSH_RUN_INDEX": str(index),
        "RUSH_PARTICIPANTS": str(options.participants),
        "RUSH_API_CLIENTS": str(options.api_clients),
        "RUSH_HOSTILE": str(options.hostile if hostile else 0),
        "RUSH_THINK_S": os.environ.get("RUSH_THINK_S", "2,10"),
    }
    command = [
        sys.executable, "-m", "locust", "-f", str(USERS_FILE), "--headless",
        "-u", str(crowd), "-r", str(options.spawn_rate), "-t", f"{options.seconds}s",
        "--host", site.base, "--only-summary", "--stop-timeout", "10",
        "--loglevel", "WARNING", "--exit-code-on-error", "0",
        # The user classes by name: a class left out is never started (a fixed_count of 0
        # would make Locust weigh it like the readers instead).
        "Reader", "Participant", "ApiClient", *(["Hostile"] if hostile else []),
    ]  # fmt: skip
    sampler = MemorySampler(site.serving_pids, float(os.environ.get("RUSH_RSS_EVERY_S") or 5))
    sampler.start()
    try:
        answer = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=options.seconds + 300,
            check=False,
        )
    finally:
        sampler.stop()
    if not report_path.exists():
        raise RuntimeError(f"locust wrote no report (exit {answer.returncode}):\n"
                           f"{answer.stderr[-3000:]}")  # fmt: skip
    report = json.loads(report_path.read_text())
    from benchmarks_app.bench._rush_goals import GOALS

    kinds, missed = summarise(report, GOALS)
    quota, problems = quota_check(report["quota"], options.quotas)
    samples = sampler.samples
    result = LoadResult(
        users,
        hostile,
        kinds,
        quota,
        rss=[(x["s"], x["rss"], x["workers"]) for x in samples],
        crowd=crowd,
        memory_samples=samples,
        memory=memory_summary(samples, options.flat_mib),
        by_minute=by_minute(report, GOALS),
    )
    run_ids = report["runs"]
    (site.dir / "runs.json").write_text(json.dumps(run_ids))
    deadline = time.monotonic() + options.drain_s
    while True:
        result.runs = site.query("--runs", str(site.dir / "runs.json"))
        if not result.runs.get("active") or time.monotonic() > deadline:
            break
        time.sleep(3)
    result.missed = missed + problems
    if result.runs.get("active") or result.runs.get("failed"):
        result.missed.append(
            f"runs: {result.runs.get('failed', 0)} failed, {result.runs.get('active', 0)} "
            f"not ended {options.drain_s} s after the load"
        )
    if result.memory.get("flat") is False:
        result.missed.append(
            f"serving memory not flat after warm-up: a worker grew "
            f"{result.memory['largest_growth_mib']:+.0f} MiB over the last third "
            f"(at most {options.flat_mib:.0f})"
        )
    return result


def measure(out: TextIO, options: Options) -> list[LoadResult]:
    import importlib.util

    if importlib.util.find_spec("locust") is None:  # not imported: it patches with gevent
        raise SystemExit("the rush bench needs locust (a dev dependency: uv sync)")
    from benchmarks_app.bench._rush_goals import GOALS

    loads = options.loads()
    site = Site(options, out)
    results: list[LoadResult] = []
    try:
        fixture = site.prepare(len(loads))
        site.start()
        workers = len(site.serving_pids()) - 1
        compared = options.compare and options.hostile
        out.write(
            f"site on {site.base}: DEBUG off, {site.db}"
            f"{' + Redis' if site.db == 'postgres' else ' + ORM broker'}, gunicorn "
            f"(config/gunicorn.conf.py: {workers} workers), 2 qcluster + webhook_qcluster, "
            f"offline judge; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n"
            f"each load run: {options.seconds} s, {options.participants} participants, "
            f"{options.api_clients} API clients, hostile accounts {options.hostile} (when on), "
            f"readers the rest; quotas {options.quotas}; Locust on this machine too\n"
            + (
                "each user count is loaded twice, first without the hostile accounts (the same "
                "readers, participants and API clients), then with them\n"
                if compared
                else ""
            )
        )
        out.flush()
        for index, (users, hostile) in enumerate(loads):
            result = load(site, fixture, index, users, hostile)
            results.append(result)
            print_load(out, result, GOALS)
            out.flush()
    except Exception:
        for name in site.processes:
            out.write(f"--- {name} log ---\n{site.log(name)}\n")
        raise
    finally:
        site.close()
    print_hostile_effect(out, results, options.compare_min)
    out.write("\n")
    print_goal(out, results)
    held = [n for n in sorted({r.users for r in results}) if _held(results, n)]
    out.write(
        "largest N that held the goal: "
        + (f"{max(held)} users" if held else f"none of {sorted({r.users for r in results})}")
        + "\n"
    )
    if options.json_file:
        Path(options.json_file).write_text(
            json.dumps([r.__dict__ for r in results], default=str, indent=1)
        )
    return results


def _held(results: list[LoadResult], users: int) -> bool:
    return all(r.held for r in results if r.users == users)


def goal_missed(results: list[LoadResult], options: Options) -> bool:
    """Whether the rush missed its goal: a load run missed it (its own goals, or with the
    hostile accounts the 1.5x ratio over the load without them); in a sweep (which looks for
    the largest user count that holds it, so that the larger ones may miss), no user count
    held it with both its loads."""
    if len(options.sweep) <= 1:
        return any(not r.held for r in results)
    return not any(_held(results, n) for n in {r.users for r in results})


def run(out: TextIO) -> None:
    options = Options.from_env()
    results = measure(out, options)
    if goal_missed(results, options):
        out.write("rush: the goal was missed (see above); exit status 1\n")
        out.flush()
        raise SystemExit(1)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    run(sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
