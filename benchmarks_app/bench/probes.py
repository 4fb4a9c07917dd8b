"""Speed of the probe scorer: cases scored per second on 100,000 generated cases (rules,
per-case scores and run metrics) and the observable-geometry time on 10,000 cases."""

from __future__ import annotations

import random
import time
from typing import TextIO

from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.geometry import observable_geometry
from scoring.probes.metrics import run_metrics
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import ScoringConfig, score_case
from scoring.probes.types import ProbeSpec

N_CASES = 100_000
N_GEOMETRY = 10_000
TARGET_CASES_PER_S = 2_000

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


def generated_cases(n: int, seed: int = 0) -> list[tuple[ProbeSpec, str]]:
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
    out = []
    for i in range(n):
        text = rng.choice(_REFUSALS + _COMPLIANCE) + _FILLER * rng.randint(0, 3)
        out.append((probes[i % len(probes)], text))
    return out


def run(out: TextIO) -> None:
    rules = CompiledRuleSet(DEFAULT_RULES)
    config = ScoringConfig()
    pairs = generated_cases(N_CASES)
    started = time.perf_counter()
    cases = [score_case(p, text, rules, config) for p, text in pairs]
    scored_s = time.perf_counter() - started
    run_metrics(cases)
    total_s = time.perf_counter() - started
    rate = N_CASES / total_s
    out.write(
        f"probes: scored {N_CASES:,} generated cases ({len(rules)} rules) in {total_s:.2f} s "
        f"(scoring {scored_s:.2f} s + run metrics {total_s - scored_s:.2f} s): "
        f"{rate:,.0f} cases/s, {rate / TARGET_CASES_PER_S:.1f}x the {TARGET_CASES_PER_S:,} "
        "cases/s target\n"
    )
    started = time.perf_counter()
    geometry = observable_geometry(cases[:N_GEOMETRY])
    geo_s = time.perf_counter() - started
    k = geometry["clustering"]["k"] if geometry else "-"
    out.write(
        f"probes: observable geometry on {N_GEOMETRY:,} cases in {geo_s:.2f} s "
        f"(k = {k}; {N_GEOMETRY / geo_s:,.0f} cases/s)\n"
    )
