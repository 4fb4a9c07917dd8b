"""The JSON report of a scored submission, its Markdown rendering, and the whole pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.probes.agreement import refusal_agreement
from scoring.probes.geometry import observable_geometry
from scoring.probes.metrics import run_metrics
from scoring.probes.refusal import RefusalDetector, RefusalVerdict, rules_verdict
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import ScoringConfig, score_case
from scoring.probes.types import CaseScore, ProbeSpec, ResponseSpec

LIMITATIONS = (
    "Scores come from a heuristic: regular-expression rules that look for refusal, boundary, "
    "protective and operational-compliance language on the surface of each response. It is not "
    "a semantic judge. It can miss harmful content phrased without the listed signals, flag "
    "harmless answers that use them (code, numbered lists, quantities), and mistake a "
    "disclaimer followed by full compliance for a refusal. Risk scores are relative evidence "
    "shares, not probabilities of harm. The observable geometry (clusters, mutual information, "
    "scatter) is exploratory statistics over surface text, not causal structure. Read the worst "
    "cases yourself before drawing conclusions, and compare models only on the same suite and "
    "rule set."
)
SIGNAL_LIMITATIONS = {
    "rules": "Refusals are recognised by the boundary rules.",
    "classifier": (
        "Refusals are recognised by a classifier trained on human-labelled responses of other "
        "models; on a model whose refusals read unlike anything it was trained on it can be "
        "wrong, and on its own training responses its agreement is optimistic."
    ),
    "openai": (
        "Refusals are labelled by an LLM judge, which can itself be wrong; its labels are "
        "cached, so a re-run repeats them."
    ),
}


def refusal_summary(signal: str, source: str) -> dict[str, str]:
    """What a report says about the refusal signal it was scored with."""
    return {"signal": signal, "source": source, "note": SIGNAL_LIMITATIONS.get(signal, "")}


def build_report(
    *,
    suite: str,
    model: str,
    cases: Sequence[CaseScore],
    metrics: dict[str, Any],
    observability: dict[str, Any] | None,
    agreement: dict[str, Any] | None = None,
    verdicts: Sequence[RefusalVerdict] | None = None,
) -> dict[str, Any]:
    """The report document; each case says which refusal signal decided it."""
    verdicts = verdicts or [rules_verdict(c.boundary_or_refusal_signal) for c in cases]
    return {
        "suite": suite,
        "model": model,
        "cases": [
            {**c.model_dump(), **v.case_fields()} for c, v in zip(cases, verdicts, strict=True)
        ],
        "metrics": metrics,
        "observability": observability,
        "agreement": agreement,
        "limitations": LIMITATIONS,
    }


def evaluate(
    *,
    suite: str,
    model: str,
    probes: Sequence[ProbeSpec],
    responses: Sequence[ResponseSpec],
    rules: CompiledRuleSet,
    config: ScoringConfig | None = None,
    geometry_min_cases: int = 5,
    refusal: RefusalDetector | None = None,
) -> dict[str, Any]:
    """Score ``responses`` against ``probes`` and build the full report (no database).

    ``refusal`` is the refusal signal (None: the rules), asked once for all responses.
    """
    config = config or ScoringConfig()
    by_id = {p.probe_id: p for p in probes}
    outputs = [r.output for r in responses]
    given: list[RefusalVerdict | None] = (
        list(refusal.detect(outputs)) if refusal is not None else [None] * len(outputs)
    )
    cases = [
        score_case(by_id[r.probe_id], r.output, rules, config, v)
        for r, v in zip(responses, given, strict=True)
    ]
    verdicts = [
        v or rules_verdict(c.boundary_or_refusal_signal) for c, v in zip(cases, given, strict=True)
    ]
    signal = refusal.signal if refusal is not None else "rules"
    source = refusal.source if refusal is not None else "rules"
    agreement = refusal_agreement(
        (
            (c.category, c.boundary_or_refusal_signal, r.human_label)
            for c, r in zip(cases, responses, strict=True)
        ),
        signal=source,
    )
    metrics = {**run_metrics(cases), "refusal_signal": refusal_summary(signal, source)}
    return build_report(
        suite=suite,
        model=model,
        cases=cases,
        metrics=metrics,
        observability=observable_geometry(cases, min_cases=geometry_min_cases),
        agreement=agreement,
        verdicts=verdicts,
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return lines


def report_markdown(report: dict[str, Any]) -> str:
    m = report["metrics"]
    o = m["overall"]
    lines = [f"# Safety probes: {report['model']} on {report['suite']}", ""]
    refusal = m.get("refusal_signal") or {"signal": "rules", "source": "rules", "note": ""}
    lines += [
        f"Refusal signal: **{refusal['signal']}** ({refusal['source']}). {refusal['note']}".strip(),
        "",
    ]
    lines += _table(
        ["Metric", "Value"],
        [
            ["Probes evaluated", m["counts"]["evaluated"]],
            ["Passed", m["counts"]["passed"]],
            ["Failed", m["counts"]["failed"]],
            ["Categories", m["counts"]["categories"]],
            ["Resilience index", m["indices"]["resilience_index"]],
            ["Exposure index", m["indices"]["exposure_index"]],
            ["Fragility spread", m["indices"]["fragility_spread"]],
            *[[k.replace("_", " ").capitalize(), v] for k, v in o.items()],
        ],
    )
    lines += ["", "## By category", ""]
    lines += _table(
        [
            "Category",
            "n",
            "Pass rate",
            "Mean risk",
            "Median risk",
            "Mean weighted risk",
            "Critical fails",
            "High fails",
            "Boundary rate",
        ],
        [
            [
                cat,
                s["n"],
                s["pass_rate"],
                s["mean_risk"],
                s["median_risk"],
                s["mean_weighted_risk"],
                s["critical_failures"],
                s["high_failures"],
                s["boundary_rate"],
            ]
            for cat, s in m["by_category"].items()
        ],
    )
    lines += ["", "## By severity", ""]
    lines += _table(
        ["Severity", "n", "Passed", "Failed", "Pass rate"],
        [
            [t, s["n"], s["passed"], s["failed"], s["pass_rate"]]
            for t, s in m["by_severity"].items()
        ],
    )
    lines += ["", "## Failure modes", ""]
    lines += _table(["Failure mode", "Cases"], list(m["failure_mode_histogram"].items()))
    lines += ["", "## Worst cases", ""]
    lines += _table(
        ["Probe", "Category", "Severity", "Weighted risk", "Explanation (with its refusal signal)"],
        [
            [w["probe_id"], w["category"], w["severity"], w["weighted_risk"], w["explanation"]]
            for w in m["worst_cases"]
        ],
    )
    agreement = report.get("agreement")
    if agreement:
        lines += ["", "## Agreement with human labels", ""]
        lines += _table(
            ["Scope", "n", "Accuracy", "Precision", "Recall", "Kappa"],
            [
                [
                    "all",
                    agreement["n"],
                    agreement["accuracy"],
                    agreement["precision"],
                    agreement["recall"],
                    agreement["kappa"],
                ]
            ]
            + [
                [cat, a["n"], a["accuracy"], a["precision"], a["recall"], a["kappa"]]
                for cat, a in agreement["by_category"].items()
            ],
        )
    obs = report.get("observability")
    lines += ["", "## Observable geometry", ""]
    if obs:
        mi = obs["mutual_information"]
        lines += [
            f"k = {obs['clustering']['k']} clusters ({obs['clustering']['k_selection']}).",
            "",
            *_table(
                ["Against", "MI (nats)", "NMI"],
                [[name, v["mi_nats"], v["nmi"]] for name, v in mi.items()],
            ),
            "",
            obs["note"],
        ]
    else:
        lines.append("Not computed: the run has fewer cases than the geometry threshold.")
    lines += ["", "## Limitations", "", report["limitations"], ""]
    return "\n".join(lines)
