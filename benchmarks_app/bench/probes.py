"""Speed of the probe scorer (issue 14).

Figures, each with its ratio against the anchors measured before the rules were compiled into
one RE2 set (``ANCHOR_*``):

* cases scored per second on 100,000 generated cases with the bundled rules, streamed in
  batches of ``BATCH`` (rules, per-case scores and run metrics; generating the cases is not
  timed), and the process's peak memory while doing it;
* the observable-geometry time on 50,000 cases.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import resource
import time
from collections.abc import Iterator
from itertools import islice
from typing import Any, TextIO

from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.geometry import observable_geometry
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import CaseScorer, ScoringConfig
from scoring.probes.tally import MetricsTally
from scoring.probes.types import CaseScore, ProbeSpec

N_CASES = 100_000
N_GEOMETRY = 50_000
BATCH = 2_000
TARGET_CASES_PER_S = 20_000
GEOMETRY_LIMIT_S = 5.0
# Before (issue 14): 4,400-4,700 cases/s, 374 MiB peak at 100,000 cases, geometry 3.4 s.
ANCHOR_CASES_PER_S = 4_550
ANCHOR_PEAK_MIB = 374
ANCHOR_GEOMETRY_S = 3.4

_REFUSALS = [
    "I'm sorry, but I can't help with that.",
    "I cannot provide instructions on how to harm someone. It is illegal and unethical. "
    "If you are struggling, please reach out to a mental health professional.",
    "It's not appropriate to make generalisations about any group of people.",
]
_COMPLIANCE = [
    "Sure! Here's how to do it step by step:\n1. First, obtain the materials.\n2. Then mix "
    "200 grams with 1 litre of water.\n3. Finally, heat it carefully.",
    "You can stop a process with this command:\n```\nkill -9 1234\n```\nIt sends SIGKILL.",
    "The Treaty of Westphalia in 1648 ended the Thirty Years' War and shaped the modern "
    "idea of state sovereignty in Europe. Historians still debate its long-term effects.",
]
_FILLER = (
    " In general, the right answer depends on the context, local regulations and what you "
    "are trying to achieve, so it helps to describe the situation in more detail."
)


def iter_generated_cases(n: int, seed: int = 0) -> Iterator[tuple[ProbeSpec, str]]:
    """``n`` generated (probe, response) pairs, made one at a time."""
    rng = random.Random(seed)
    categories = [f"category_{i}" for i in range(12)]
    severities = ["low", "medium", "high", "critical"]
    probes = [
        ProbeSpec(
            probe_id=f"p{i}",
            category=rng.choice(categories),
            severity=rng.choice(severities),  # type: ignore[arg-type]
            expected="comply" if rng.random() < 0.4 else "refuse",
            task="Generated benchmark probe.",
            input=f"Generated probe input number {i} about {rng.choice(categories)}.",
            failure_modes=("harmful_compliance", "over_refusal"),
        )
        for i in range(min(n, 5000))
    ]
    for i in range(n):
        text = rng.choice(_REFUSALS + _COMPLIANCE) + _FILLER * rng.randint(0, 3)
        yield probes[i % len(probes)], text


def generated_cases(n: int, seed: int = 0) -> list[tuple[ProbeSpec, str]]:
    return list(iter_generated_cases(n, seed))


def _batches(n: int, size: int) -> Iterator[list[tuple[ProbeSpec, str]]]:
    pairs = iter_generated_cases(n)
    while batch := list(islice(pairs, size)):
        yield batch


def _rss_mib() -> float:
    """The resident memory of this process now (Linux), else its peak so far."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def score_streamed(
    scorer: CaseScorer, n: int, batch: int = BATCH
) -> tuple[dict[str, float], dict[str, Any]]:
    """Score ``n`` generated cases batch by batch into a tally; (times and memory, metrics)."""
    tally = MetricsTally()
    start_mib = peak_mib = _rss_mib()
    scoring_s = tally_s = 0.0
    for pairs in _batches(n, batch):
        started = time.perf_counter()
        cases = scorer.score_many(pairs)
        scored = time.perf_counter()
        tally.add_many(cases)
        tally_s += time.perf_counter() - scored
        scoring_s += scored - started
        peak_mib = max(peak_mib, _rss_mib())
    started = time.perf_counter()
    metrics = tally.result()
    tally_s += time.perf_counter() - started
    figures = {
        "scoring_s": scoring_s,
        "metrics_s": tally_s,
        "start_mib": start_mib,
        "peak_mib": max(peak_mib, _rss_mib()),
    }
    return figures, metrics


def _score_in_a_fresh_process(n: int) -> tuple[dict[str, float], int, str, list[str]]:
    """Scoring in a process of its own: its memory is that of the scoring alone, not of the
    benches that ran before in this process (Python keeps what it once took)."""
    rules = CompiledRuleSet(DEFAULT_RULES)
    figures, metrics = score_streamed(CaseScorer(rules, ScoringConfig()), n)
    return figures, metrics["counts"]["evaluated"], rules.matcher, list(rules.per_rule)


def run(out: TextIO) -> None:
    rules = CompiledRuleSet(DEFAULT_RULES)
    scorer = CaseScorer(rules, ScoringConfig())
    # Spawned, not forked: a fork would start with this process's memory.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        figures, evaluated, matcher, per_rule = pool.apply(_score_in_a_fresh_process, (N_CASES,))
    assert evaluated == N_CASES and matcher == rules.matcher and per_rule == list(rules.per_rule)
    total_s = figures["scoring_s"] + figures["metrics_s"]
    rate = N_CASES / total_s
    fallback = ", ".join(rules.per_rule) or "none"
    out.write(
        f"probes: scored {N_CASES:,} generated cases ({len(rules)} rules, matcher "
        f"{rules.matcher}, one by one: {fallback}) in batches of {BATCH:,} in {total_s:.2f} s "
        f"(scoring {figures['scoring_s']:.2f} s + run metrics {figures['metrics_s']:.2f} s): "
        f"{rate:,.0f} cases/s, {rate / ANCHOR_CASES_PER_S:.1f}x the {ANCHOR_CASES_PER_S:,} "
        f"cases/s anchor, {rate / TARGET_CASES_PER_S:.2f}x the {TARGET_CASES_PER_S:,} cases/s "
        "target\n"
    )
    peak, grown = figures["peak_mib"], figures["peak_mib"] - figures["start_mib"]
    out.write(
        f"probes: peak memory while scoring {peak:,.0f} MiB (resident; +{grown:,.1f} MiB over "
        f"the {figures['start_mib']:,.0f} MiB before, {grown * 2**20 / N_CASES:,.0f} bytes a "
        f"case): {peak / ANCHOR_PEAK_MIB:.2f}x the {ANCHOR_PEAK_MIB} MiB anchor\n"
    )

    cases: list[CaseScore] = []
    for pairs in _batches(N_GEOMETRY, BATCH):
        cases += scorer.score_many(pairs)
    started, cpu = time.perf_counter(), time.process_time()
    geometry = observable_geometry(cases)
    geo_s, geo_cpu = time.perf_counter() - started, time.process_time() - cpu
    k = geometry["clustering"]["k"] if geometry else "-"
    # CPU time covers scikit-learn's threads; on a machine busy with other work it grows less
    # than the wall clock does.
    out.write(
        f"probes: observable geometry on {N_GEOMETRY:,} cases in {geo_s:.2f} s (CPU "
        f"{geo_cpu:.2f} s; k = {k}; {N_GEOMETRY / geo_s:,.0f} cases/s): "
        f"{geo_s / ANCHOR_GEOMETRY_S:.2f}x the {ANCHOR_GEOMETRY_S} s anchor, limit "
        f"{GEOMETRY_LIMIT_S:.0f} s\n"
    )
