"""The figures of the rush bench (:mod:`.rush`): per request kind percentiles and outcomes,
quota exactness, the hostile accounts' effect (each kind's p95 with them over its p95 in the
same load without them) and the goal line that sums them up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TextIO

from benchmarks_app.bench._rush_memory import print_memory

# Hostile files must not raise another request's p95 by more than this (issue 35).
HOSTILE_EFFECT_MAX = 1.5
# Not held to the ratio: the hostile uploads themselves, and the participants' logins (one
# each, all in the first seconds of the load, where the crowd's start dominates their time).
NOT_COMPARED = frozenset({"hostile upload", "login"})


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0-100) of ``values``; nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class LoadResult:
    users: int
    hostile: bool
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)
    quota: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    rss: list[tuple[float, float, int]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    # The Locust users it ran (without the hostile accounts: ``users`` less them).
    crowd: int = 0
    memory_samples: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    # (minute of the load, answers, p50, p95) of the requests with a goal: where the tail is.
    by_minute: list[tuple[int, int, float, float]] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.missed


OUTCOMES = ("refused", "busy", "errors", "5xx", "no answer")


def summarise(
    report: dict[str, Any], goals: dict[str, int | None]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per request kind: count, p50/p95/p99, and the answers by outcome (``OUTCOMES``, from
    the Locust listener's ``outcomes``); and the goals it missed."""
    from benchmarks_app.bench._rush_goals import CLOSED_IS_REFUSAL, READS_FILES

    kinds: dict[str, dict[str, Any]] = {}
    missed: list[str] = []
    for kind, times in sorted(report["times_ms"].items()):
        statuses: dict[str, int] = report["statuses"].get(kind, {})
        seen: dict[str, int] = report.get("outcomes", {}).get(kind, {})
        counts = {name: int(seen.get(name, 0)) for name in OUTCOMES}
        row = {
            "count": len(times),
            "p50": percentile(times, 50),
            "p95": percentile(times, 95),
            "p99": percentile(times, 99),
            **counts,
            "statuses": statuses,
            "failures": report.get("failures", {}).get(kind, {}),
        }
        kinds[kind] = row
        goal = goals.get(kind)
        if goal is not None and row["p95"] >= goal:
            missed.append(f"{kind}: p95 {row['p95']:.0f} ms (goal < {goal} ms)")
        unanswered = 0 if kind in CLOSED_IS_REFUSAL else counts["no answer"]
        if counts["5xx"] or unanswered or counts["errors"]:
            missed.append(
                f"{kind}: {counts['5xx']} 5xx, {counts['errors']} unexpected answers, "
                f"{counts['no answer']} without answer"
            )
        if counts["busy"] and kind not in READS_FILES:
            missed.append(f"{kind}: {counts['busy']} busy (503) on a request that reads no file")
    return kinds, missed


def by_minute(
    report: dict[str, Any], goals: dict[str, int | None]
) -> list[tuple[int, int, float, float]]:
    """The requests of every kind with a goal, by the minute of the load they were answered in
    (from the first answer of any kind): (minute from 1, answers, p50 ms, p95 ms)."""
    ends: dict[str, list[float]] = report.get("ends_s", {})
    starts = [min(times) for times in ends.values() if times]
    if not starts:
        return []
    first = min(starts)
    minutes: dict[int, list[float]] = {}
    for kind, times in report["times_ms"].items():
        if goals.get(kind) is None:
            continue
        for took, end in zip(times, ends.get(kind, []), strict=False):
            minutes.setdefault(int((end - first) // 60) + 1, []).append(took)
    return [
        (m, len(ts), percentile(ts, 50), percentile(ts, 95)) for m, ts in sorted(minutes.items())
    ]


def quota_check(
    quota: dict[str, dict[str, dict[str, int]]], limits: dict[str, int]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per benchmark: accepted, refused (429), busy (503, sent again after Retry-After), other
    answers, and whether each account that was refused had exactly its limit accepted (and
    none more)."""
    out: dict[str, dict[str, Any]] = {}
    problems = []
    for benchmark, accounts in quota.items():
        limit = limits[benchmark]
        accepted = sum(c.get("accepted", 0) for c in accounts.values())
        refused = sum(c.get("refused", 0) for c in accounts.values())
        busy = sum(c.get("busy", 0) for c in accounts.values())
        other = sum(n for c in accounts.values() for k, n in c.items() if k.startswith("HTTP"))
        reached = [u for u, c in accounts.items() if c.get("refused")]
        wrong = [
            f"{u} accepted {c.get('accepted', 0)}"
            for u, c in accounts.items()
            if c.get("accepted", 0) > limit or (c.get("refused") and c.get("accepted", 0) != limit)
        ]
        out[benchmark] = {
            "limit": limit,
            "accepted": accepted,
            "refused_429": refused,
            "busy_503": busy,
            "other": other,
            "accounts_at_limit": len(reached),
            "accounts": len(accounts),
            "exact": not wrong,
        }
        if wrong:
            problems.append(f"{benchmark} quota of {limit} not exact: {', '.join(wrong[:5])}")
    return out, problems


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}"


def print_load(out: TextIO, result: LoadResult, goals: dict[str, int | None]) -> None:
    if result.hostile:
        title = f"{result.users} users, with the hostile accounts"
    else:
        title = f"{result.users} users' load without the hostile accounts ({result.crowd} users)"
    out.write(f"\n-- {title} --\n")
    out.write(
        f"{'request kind':<16} {'count':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
        f"{'refused':>7} {'busy':>5} {'errors':>6} {'5xx':>4} {'no ans':>6}  goal p95\n"
    )
    for kind, row in result.kinds.items():
        goal = goals.get(kind)
        out.write(
            f"{kind:<16} {row['count']:>6} {_fmt(row['p50']):>7} {_fmt(row['p95']):>7} "
            f"{_fmt(row['p99']):>7} {row['refused']:>7} {row['busy']:>5} {row['errors']:>6} "
            f"{row['5xx']:>4} {row['no answer']:>6}  {'< ' + str(goal) if goal else '-'}\n"
        )
    out.write(
        "(refused: 4xx the visitor expected: quota 429s, hostile files refused, 404 past a\n"
        " list's last page, 409 for the bundle of a run still judged; busy: 503 + Retry-After\n"
        " from the reader caps, sent again after it by participants; errors: answers nobody\n"
        " expected; 5xx: every other server error)\n"
    )
    if result.by_minute:
        out.write(
            "requests with a goal, by minute of the load (answers: p50 / p95 ms): "
            + "; ".join(
                f"{m}: {n} {_fmt(p50)} / {_fmt(p95)}" for m, n, p50, p95 in result.by_minute
            )
            + "\n"
        )
    for benchmark, q in result.quota.items():
        out.write(
            f"quota {benchmark:<9}: limit {q['limit']}/account/day; accepted {q['accepted']}, "
            f"refused (429) {q['refused_429']}, busy (503) {q['busy_503']}, other {q['other']}; "
            f"{q['accounts_at_limit']}/{q['accounts']} accounts reached it; "
            f"{'exact' if q['exact'] else 'NOT exact'}\n"
        )
    r = result.runs
    out.write(
        f"runs: {r.get('submitted', 0)} submitted, {r.get('succeeded', 0)} succeeded, "
        f"{r.get('failed', 0)} failed, {r.get('active', 0)} still active after the drain\n"
    )
    print_memory(out, result.memory_samples, result.memory)
    verdict = "held" if result.held else "MISSED: " + "; ".join(result.missed)
    out.write(f"goals of this load alone: {verdict}\n")
    for kind, row in result.kinds.items():
        for message, n in list(row.get("failures", {}).items())[:3]:
            out.write(f"  {kind} failed x{n}: {message}\n")


def hostile_effect(
    without: LoadResult, with_: LoadResult, min_requests: int
) -> list[dict[str, Any]]:
    """Per request kind of both loads (but ``NOT_COMPARED``): p95 with / without the hostile
    accounts and their ratio; ``judged`` is False where either load has fewer than
    ``min_requests`` of it (printed, not held to the goal)."""
    rows = []
    for kind, row in with_.kinds.items():
        base = without.kinds.get(kind)
        if base is None or kind in NOT_COMPARED:
            continue
        ratio = row["p95"] / base["p95"] if base["p95"] else math.nan
        rows.append(
            {
                "kind": kind,
                "with": row["p95"],
                "without": base["p95"],
                "counts": (row["count"], base["count"]),
                "ratio": ratio,
                "judged": min(row["count"], base["count"]) >= min_requests
                and not math.isnan(ratio),
            }
        )
    return rows


def print_hostile_effect(out: TextIO, results: list[LoadResult], min_requests: int) -> None:
    """The table of :func:`hostile_effect` for each user count with both loads; a judged
    ratio over ``HOSTILE_EFFECT_MAX`` is a goal the load with the hostile accounts missed."""
    for users in sorted({r.users for r in results}):
        without = next((r for r in results if r.users == users and not r.hostile), None)
        with_ = next((r for r in results if r.users == users and r.hostile), None)
        if without is None or with_ is None:
            continue
        out.write(
            f"\nhostile accounts' effect at {users} users: p95 with / without them (ms), ratio "
            f"(goal <= {HOSTILE_EFFECT_MAX}x; kinds with fewer than {min_requests} requests in "
            "either load are shown, not judged)\n"
        )
        out.write(f"  {'request kind':<16} {'with':>7} {'without':>7} {'ratio':>6}  requests\n")
        for row in hostile_effect(without, with_, min_requests):
            over = row["judged"] and row["ratio"] > HOSTILE_EFFECT_MAX
            note = "OVER" if over else ("" if row["judged"] else "not judged")
            if over:
                with_.missed.append(
                    f"hostile accounts' effect: {row['kind']} p95 x{row['ratio']:.2f} "
                    f"(> {HOSTILE_EFFECT_MAX})"
                )
            ratio = "-" if math.isnan(row["ratio"]) else f"{row['ratio']:.2f}x"
            out.write(
                f"  {row['kind']:<16} {_fmt(row['with']):>7} {_fmt(row['without']):>7} "
                f"{ratio:>6}  {row['counts'][0]} / {row['counts'][1]}  {note}\n"
            )


def print_goal(out: TextIO, results: list[LoadResult]) -> None:
    """One goal line per user count: held only when its loads held every goal of their own
    and, with the hostile accounts, the 1.5x ratio."""
    for users in sorted({r.users for r in results}):
        missed = [
            f"{'with' if r.hostile else 'without'} the hostile accounts: {m}"
            for r in results
            if r.users == users
            for m in r.missed
        ]
        verdict = "held" if not missed else "MISSED: " + "; ".join(missed)
        out.write(f"goal at {users} users: {verdict}\n")
