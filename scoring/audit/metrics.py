"""Audit metrics and the report in the reference layout (Markdown) and as JSON.

Counts are summed over repos before ratios are computed. QA findings (Info / Best Practices)
count in ``scan`` and are left out of the with-partial precision denominator. Judge-failed
truth findings, and those left unjudged behind them, stay in ``truth`` (the recall
denominator) but are not counted as misses. Every ratio with a zero denominator (a scanner
that reported nothing, a repo without truth findings) is 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from scoring.audit.types import QA_SEVERITIES, SEVERITIES, SEVERITY_KEYS

COUNT_KEYS = ("truth", "scan", "qa", "tp", "partial", "fp", "fn")
RATIO_KEYS = (
    "precision",
    "recall",
    "f1",
    "precision_with_partial",
    "recall_with_partial",
    "f1_with_partial",
)
REPORT_KEYS = ("repo", *COUNT_KEYS, *RATIO_KEYS, "truth_severity_counts", "scan_severity_counts")


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def severity_counts(severities: Iterable[str]) -> dict[str, int]:
    counts = Counter(severities)
    return {SEVERITY_KEYS[s]: counts.get(s, 0) for s in SEVERITIES}


def with_ratios(counts: dict[str, Any]) -> dict[str, Any]:
    tp, partial = counts["tp"], counts["partial"]
    precision = _ratio(tp, counts["scan"])
    recall = _ratio(tp, counts["truth"])
    p_wp = _ratio(tp + partial, counts["scan"] - counts["qa"])
    r_wp = _ratio(tp + partial, counts["truth"])
    return {
        **counts,
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "precision_with_partial": p_wp,
        "recall_with_partial": r_wp,
        "f1_with_partial": _f1(p_wp, r_wp),
    }


def repo_metrics(
    *,
    repo: str,
    truth_severities: Sequence[str],
    scan_severities: Sequence[str],
    tp: int,
    partial: int,
    judge_failed: int = 0,
    not_judged: int = 0,
) -> dict[str, Any]:
    """``judge_failed`` and ``not_judged`` (left behind a failure) are not misses."""
    truth, scan = len(truth_severities), len(scan_severities)
    counts: dict[str, Any] = {
        "repo": repo,
        "truth": truth,
        "scan": scan,
        "qa": sum(1 for s in scan_severities if s in QA_SEVERITIES),
        "tp": tp,
        "partial": partial,
        "fp": scan - tp - partial,
        "fn": truth - tp - judge_failed - not_judged,
    }
    row = with_ratios(counts)
    row["truth_severity_counts"] = severity_counts(truth_severities)
    row["scan_severity_counts"] = severity_counts(scan_severities)
    row["judge_failed"] = judge_failed
    row["not_judged"] = not_judged
    return row


def overall(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, Any] = {"repo": "ALL"}
    for key in COUNT_KEYS:
        counts[key] = sum(int(r.get(key, 0)) for r in rows)
    row = with_ratios(counts)
    for key in ("truth_severity_counts", "scan_severity_counts"):
        total: Counter[str] = Counter()
        for r in rows:
            total.update(r.get(key) or {})
        row[key] = {k: total.get(k, 0) for k in SEVERITY_KEYS.values()}
    return row


def report_row(metrics: dict[str, Any]) -> dict[str, Any]:
    """Exactly the keys of the JSON report, in order."""
    return {key: metrics[key] for key in REPORT_KEYS}


def build_report(
    *, scanner: str, run: Any, repo_rows: Sequence[dict[str, Any]], is_complete: bool = True
) -> dict[str, Any]:
    rows = [report_row(r) for r in sorted(repo_rows, key=lambda r: r["repo"])]
    return {
        "scanner": scanner,
        "run": run,
        "is_complete": is_complete,
        "repos": rows,
        "overall": report_row(overall(rows)),
    }


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


OVERVIEW_HEADER = (
    "| Repo | Truth | AI Scan | QA | TP | Partial | FP | FN | Precision | Recall | F1 "
    "| P(w/partial) | R(w/partial) | F1(w/partial) |"
)


def overview_line(row: dict[str, Any], *, bold: bool = False) -> str:
    cells = [
        str(row["repo"]),
        *(str(row[k]) for k in COUNT_KEYS),
        *(pct(row[k]) for k in RATIO_KEYS),
    ]
    if bold:
        cells = [f"**{c}**" for c in cells]
    return "| " + " | ".join(cells) + " |"


def overview_table(report: dict[str, Any]) -> str:
    lines = [OVERVIEW_HEADER, "|" + "---|" * 1 + "---:|" * 13]
    lines += [overview_line(r) for r in report["repos"]]
    lines.append(overview_line(report["overall"], bold=True))
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    run = report.get("run")
    out = [f"# Audit report: {report['scanner']}", ""]
    if run is not None:
        runs = run if isinstance(run, list) else [run]
        out += [f"Evaluation run(s): {', '.join(f'#{r}' for r in runs)}", ""]
    if not report.get("is_complete", True):
        out += [
            "> **Incomplete:** some truth findings could not be judged; resume the run.",
            "",
        ]
    out += ["## Overview", "", overview_table(report), ""]
    for row in report["repos"]:
        out += [f"## {row['repo']}", ""]
        out += [
            f"- Truth findings: {row['truth']}; scan findings: {row['scan']} (QA: {row['qa']})",
            f"- TP: {row['tp']}, partial: {row['partial']}, FP: {row['fp']}, FN: {row['fn']}",
            f"- Precision {pct(row['precision'])}, recall {pct(row['recall'])}, "
            f"F1 {pct(row['f1'])}; with partial: precision "
            f"{pct(row['precision_with_partial'])}, recall {pct(row['recall_with_partial'])}, "
            f"F1 {pct(row['f1_with_partial'])}",
            "",
            "| Severity | Truth | Scan |",
            "|---|---:|---:|",
        ]
        for sev, key in SEVERITY_KEYS.items():
            out.append(
                f"| {sev} | {row['truth_severity_counts'].get(key, 0)} "
                f"| {row['scan_severity_counts'].get(key, 0)} |"
            )
        out.append("")
    return "\n".join(out)
