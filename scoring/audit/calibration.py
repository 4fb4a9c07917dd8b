"""Agreement of the offline judge with recorded LLM verdicts (``recorded/``).

Per truth finding, both sides give exact / partial / none (after post-processing). Reported:
Cohen's kappa on those three classes, raw agreement, and — over truth findings where both
name a scan finding — how often they name the same one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoring.audit.judges import OfflineAuditJudge, OfflineParams
from scoring.audit.matching import match_repo
from scoring.audit.parsing import read_path
from scoring.audit.types import MATCH, NONE, PARTIAL, ScanItem, TruthItem

LABELS = (MATCH, PARTIAL, NONE)


@dataclass
class RepoCase:
    repo: str
    truths: list[TruthItem]
    scans: list[ScanItem]
    recorded: list[tuple[str, int | None]]  # (label, scan index) per truth finding


@dataclass
class Agreement:
    params: OfflineParams
    n: int
    kappa: float
    accuracy: float
    same_finding: float
    both_named: int
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    offline_counts: dict[str, int] = field(default_factory=dict)
    recorded_counts: dict[str, int] = field(default_factory=dict)


def recorded_verdicts(path: Path) -> list[tuple[str, int | None]]:
    rows = [r for r in json.loads(path.read_text(encoding="utf-8")) if not r.get("is_fp")]
    out: list[tuple[str, int | None]] = []
    for r in rows:
        index = int(r.get("index_of_finding_from_junior_auditor", -1))
        if index < 0:  # a claimed match at -1 names nothing: it is not a match
            out.append((NONE, None))
        elif r.get("is_match"):
            out.append((MATCH, index))
        elif r.get("is_partial_match"):
            out.append((PARTIAL, index))
        else:
            out.append((NONE, None))
    return out


def load_cases(data_dir: Path, *, scanner: str = "baseline") -> list[RepoCase]:
    data = read_path(data_dir)
    cases = []
    for scan in data.scans:
        recorded = data_dir / "recorded" / f"{scan.project_id}_results.json"
        if scan.scanner != scanner or not recorded.is_file():
            continue
        truths, scans = data.match_items(scan)
        cases.append(RepoCase(scan.project_id, truths, scans, recorded_verdicts(recorded)))
    return cases


def cohen_kappa(a: list[str], b: list[str]) -> float:
    from sklearn.metrics import cohen_kappa_score

    if len(set(a) | set(b)) < 2:
        return 1.0
    return float(cohen_kappa_score(a, b, labels=list(LABELS)))


async def _offline(case: RepoCase, judge: OfflineAuditJudge) -> list[tuple[str, int | None]]:
    match = await match_repo(judge, case.truths, case.scans)
    by_key = {o.truth_key: o for o in match.outcomes}
    result = []
    for t in case.truths:
        final = match.final[t.key]
        result.append((final, by_key[t.key].scan_index if final != NONE else None))
    return result


def evaluate(
    cases: list[RepoCase], params: OfflineParams, *, template: OfflineAuditJudge | None = None
) -> Agreement:
    judge = OfflineAuditJudge(params=params)
    if template is not None:
        judge._sims = template._sims  # same corpus, other thresholds: reuse the similarities
    else:
        for case in cases:
            judge.register(case.repo, case.truths, case.scans)
    rec: list[tuple[str, int | None]] = []
    off: list[tuple[str, int | None]] = []
    for case in cases:
        rec += case.recorded
        off += asyncio.run(_offline(case, judge))
    a = [r[0] for r in rec]
    b = [o[0] for o in off]
    named = [(r[1], o[1]) for r, o in zip(rec, off, strict=True) if r[0] != NONE and o[0] != NONE]
    confusion = {x: {y: 0 for y in LABELS} for x in LABELS}
    for x, y in zip(a, b, strict=True):
        confusion[x][y] += 1
    return Agreement(
        params=params,
        n=len(a),
        kappa=cohen_kappa(a, b),
        accuracy=sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else 0.0,
        same_finding=sum(r == o for r, o in named) / len(named) if named else 0.0,
        both_named=len(named),
        confusion=confusion,
        offline_counts=dict(Counter(b)),
        recorded_counts=dict(Counter(a)),
    )


def grid(
    exact: Iterable[float], partial_gap: Iterable[float], ident: Iterable[float]
) -> list[OfflineParams]:
    return [
        OfflineParams(exact=round(e, 3), partial=round(e - g, 3), ident_weight=w)
        for e, g, w in itertools.product(exact, partial_gap, ident)
        if e - g > 0
    ]


def calibrate(cases: list[RepoCase], candidates: list[OfflineParams]) -> list[Agreement]:
    """Every candidate's agreement, best first (kappa, then same-finding rate)."""
    templates: dict[Any, OfflineAuditJudge] = {}
    results = []
    for params in candidates:
        # Similarities do not depend on the thresholds or the identifier weight.
        template = templates.get("sims")
        if template is None:
            template = OfflineAuditJudge(params=params)
            for case in cases:
                template.register(case.repo, case.truths, case.scans)
            templates["sims"] = template
        results.append(evaluate(cases, params, template=template))
    results.sort(key=lambda r: (-r.kappa, -r.same_finding, -r.params.exact))
    return results


DEFAULT_GRID = grid(
    [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6],
    [0.02, 0.05, 0.1, 0.15],
    [0.0, 0.2, 0.35, 0.5],
)


def render_markdown(current: Agreement, best: Agreement, candidates: int) -> str:
    def row(a: Agreement) -> str:
        p = a.params
        return (
            f"| exact ≥ {p.exact}, partial ≥ {p.partial}, identifier weight {p.ident_weight} "
            f"| {a.kappa:.3f} | {100 * a.accuracy:.1f}% | {100 * a.same_finding:.1f}% "
            f"({a.both_named}) | {a.offline_counts.get(MATCH, 0)}/"
            f"{a.offline_counts.get(PARTIAL, 0)} |"
        )

    lines = [
        "# Offline judge calibration",
        "",
        "The `offline` audit judge (TF-IDF over words and code identifiers, IDF fitted per repo,",
        "cosine similarity blended with the overlap of code identifiers) compared with the",
        "reference pipeline's recorded o4-mini verdicts in `recorded/` (8 repos, "
        f"{current.n} truth findings, scanner `baseline`, batch size 10).",
        "",
        f"Recorded: {current.recorded_counts.get(MATCH, 0)} exact, "
        f"{current.recorded_counts.get(PARTIAL, 0)} partial (the recorded partial at index -1",
        "counts as none), the rest none.",
        "",
        "| Thresholds | Cohen's kappa (exact/partial/none) | Raw agreement "
        "| Same scan finding (n both named) | Offline exact/partial |",
        "|---|---:|---:|---:|---:|",
        row(current),
        "",
        f"Thresholds chosen by grid search over {candidates} candidates (best kappa); the "
        "figures are in-sample, so expect less on new data. The offline judge is a free, "
        "deterministic stand-in for demos and tests, not a replacement for the LLM judge.",
        "",
        "Confusion (rows: recorded, columns: offline):",
        "",
        "| | exact | partial | none |",
        "|---|---:|---:|---:|",
    ]
    for label in LABELS:
        c = current.confusion[label]
        lines.append(f"| {label} | {c[MATCH]} | {c[PARTIAL]} | {c[NONE]} |")
    if best.params != current.params:
        lines += ["", "Best candidate of this grid (not the default):", "", row(best)]
    lines += [
        "",
        "Regenerate: `uv run python -m scoring.audit.calibration "
        "benchmarks_app/sample_data/audit "
        "benchmarks_app/sample_data/audit/OFFLINE_JUDGE_CALIBRATION.md` (about 4 minutes).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import sys

    args = sys.argv[1:] if argv is None else argv
    data_dir = Path(args[0] if args else "benchmarks_app/sample_data/audit")
    cases = load_cases(data_dir)
    current = evaluate(cases, OfflineParams())
    ranked = calibrate(cases, DEFAULT_GRID)
    text = render_markdown(current, ranked[0], len(DEFAULT_GRID))
    out = Path(args[1]) if len(args) > 1 else None
    if out:
        out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
