"""Audit metrics and the report in the reference layout (Markdown) and as JSON.

Counts are summed over repos before ratios are computed. QA findings (Info / Best Practices)
count in ``scan`` and are left out of the with-partial precision denominator. Every ratio with
a zero denominator (a scanner that reported nothing, a repo without truth findings) is 0.

An incomplete repo (some truth findings judge-failed, or left unjudged behind a failure) has
no precision, recall or F1, and no false-positive count: the scan findings that its unjudged
truth findings could match are not known to be false positives, and its recall would count
them as misses. Those values are ``None`` (shown as "—"), and so are the overall ones of a
report with an incomplete repo; the report says how many truth findings were judged. Its
judge-failed and unjudged truth findings are not misses either (``fn`` counts judged misses).
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


INCOMPLETE_NOTE = (
    "Precision, recall and F1 are not given (—) for incomplete repos, nor overall when a repo "
    "is incomplete: scan findings that the unjudged truth findings could match are not known "
    "to be false positives. They are given once every truth finding is judged; the run says "
    "why some could not be."
)


def unjudged(row: dict[str, Any]) -> int:
    """Truth findings of a metrics row that have no verdict (judge-failed or left behind)."""
    return int(row.get("judge_failed") or 0) + int(row.get("not_judged") or 0)


def judged(row: dict[str, Any]) -> int:
    return int(row.get("truth") or 0) - unjudged(row)


def is_row_complete(row: dict[str, Any]) -> bool:
    return unjudged(row) == 0


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def severity_counts(severities: Iterable[str]) -> dict[str, int]:
    counts = Counter(severities)
    return {SEVERITY_KEYS[s]: counts.get(s, 0) for s in SEVERITIES}


def with_ratios(counts: dict[str, Any]) -> dict[str, Any]:
    """The counts with their ratios; ``None`` ratios and ``fp`` when some truth is unjudged."""
    if unjudged(counts):
        return {**counts, "fp": None, **dict.fromkeys(RATIO_KEYS)}
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
    """``judge_failed`` and ``not_judged`` (left behind a failure) are not misses; with either,
    the repo is incomplete and its ratios and ``fp`` are ``None``."""
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
        "judge_failed": judge_failed,
        "not_judged": not_judged,
    }
    row = with_ratios(counts)
    row["truth_severity_counts"] = severity_counts(truth_severities)
    row["scan_severity_counts"] = severity_counts(scan_severities)
    return row


def as_shown(metrics: dict[str, Any]) -> dict[str, Any]:
    """A stored metrics row as it may be shown: rows of incomplete repos stored before their
    ratios were withheld get ``None`` ratios and ``fp`` here too.

    Stored rows outlive the code that wrote them (an older format, a row seeded by hand), so a
    row missing any key is completed from its counts rather than trusted to have them all.
    """
    if any(key not in metrics for key in REPORT_KEYS):
        counts: dict[str, Any] = {"repo": metrics.get("repo", "?")}
        for key in (*COUNT_KEYS, "judge_failed", "not_judged"):
            counts[key] = int(metrics.get(key) or 0)
        if "fp" not in metrics:
            counts["fp"] = max(counts["scan"] - counts["tp"] - counts["partial"], 0)
        metrics = {
            **with_ratios(counts),
            "truth_severity_counts": metrics.get("truth_severity_counts") or {},
            "scan_severity_counts": metrics.get("scan_severity_counts") or {},
        }
    if is_row_complete(metrics):
        return metrics
    return {**metrics, "fp": None, **dict.fromkeys(RATIO_KEYS)}


def overall(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts summed over ``rows``, then ratios: ``None`` when any row is incomplete."""
    counts: dict[str, Any] = {"repo": "ALL"}
    for key in (*COUNT_KEYS, "judge_failed", "not_judged"):
        counts[key] = sum(int(r.get(key) or 0) for r in rows)
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
    """The report document. ``incomplete`` lists the repos with unjudged truth findings (how
    many of their truth findings were judged); their ratios, and the overall ones, are null."""
    shown = [as_shown(r) for r in sorted(repo_rows, key=lambda r: r["repo"])]
    incomplete = [
        {
            "repo": r["repo"],
            "truth": int(r.get("truth") or 0),
            "judged": judged(r),
            "judge_failed": int(r.get("judge_failed") or 0),
            "not_judged": int(r.get("not_judged") or 0),
        }
        for r in shown
        if not is_row_complete(r)
    ]
    return {
        "scanner": scanner,
        "run": run,
        "is_complete": is_complete and not incomplete,
        "repos": [report_row(r) for r in shown],
        "overall": report_row(overall(shown)),
        "incomplete": incomplete,
        "note": INCOMPLETE_NOTE if incomplete else "",
    }


def incomplete_text(entry: dict[str, Any]) -> str:
    """``incomplete: X of Y truth findings judged`` for an entry of a report's ``incomplete``."""
    return f"incomplete: {entry['judged']} of {entry['truth']} truth findings judged"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _count(value: int | None) -> str:
    return "—" if value is None else str(value)


OVERVIEW_HEADER = (
    "| Repo | Truth | AI Scan | QA | TP | Partial | FP | FN | Precision | Recall | F1 "
    "| P(w/partial) | R(w/partial) | F1(w/partial) |"
)


def overview_line(row: dict[str, Any], *, bold: bool = False) -> str:
    cells = [
        str(row["repo"]),
        *(_count(row[k]) for k in COUNT_KEYS),
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


def board_line(board: dict[str, Any]) -> str:
    """The scanner's place on its board: rank and range, or coverage when incomplete."""
    ci = board.get("f1_with_partial_ci")
    interval = f"; F1 (w/ partial) 95% interval {pct(ci[0])} to {pct(ci[1])}" if ci else ""
    coverage = f"{board['repos_evaluated']}/{board['repos_total']} repos"
    if board.get("rank") is None:
        return f"Board: incomplete ({coverage} evaluated), not ranked{interval}"
    return (
        f"Board: rank {board['rank']} (could be {board['rank_low']}-{board['rank_high']}), "
        f"{coverage}{interval}"
    )


def render_markdown(report: dict[str, Any]) -> str:
    run = report.get("run")
    out = [f"# Audit report: {report['scanner']}", ""]
    if report.get("release") or report.get("judge"):
        out += [
            f"Release: {report.get('release') or '— (current truth, on no board)'} · "
            f"judge: {report.get('judge') or '—'}",
            "",
        ]
    if run is not None:
        runs = run if isinstance(run, list) else [run]
        out += [f"Evaluation run(s): {', '.join(f'#{r}' for r in runs)}", ""]
    board = report.get("board")
    if board:
        out += [board_line(board), ""]
    incomplete = {e["repo"]: e for e in report.get("incomplete") or []}
    if incomplete:
        judged_n = sum(e["judged"] for e in incomplete.values())
        truth_n = sum(e["truth"] for e in incomplete.values())
        per_repo = ", ".join(f"{r}: {e['judged']} of {e['truth']}" for r, e in incomplete.items())
        out += [
            f"> **Incomplete:** only {judged_n} of {truth_n} truth findings of "
            f"{len(incomplete)} repo(s) were judged ({per_repo}). "
            f"{report.get('note') or INCOMPLETE_NOTE}",
            "",
        ]
    elif not report.get("is_complete", True):
        out += [
            "> **Incomplete:** some truth findings could not be judged; resume the run.",
            "",
        ]
    out += ["## Overview", "", overview_table(report), ""]
    for row in report["repos"]:
        entry = incomplete.get(row["repo"])
        out += [f"## {row['repo']}", ""]
        out += [
            f"- Truth findings: {row['truth']}; scan findings: {row['scan']} (QA: {row['qa']})",
            f"- TP: {row['tp']}, partial: {row['partial']}, FP: {_count(row['fp'])}, "
            f"FN: {row['fn']}",
            f"- Precision {pct(row['precision'])}, recall {pct(row['recall'])}, "
            f"F1 {pct(row['f1'])}; with partial: precision "
            f"{pct(row['precision_with_partial'])}, recall {pct(row['recall_with_partial'])}, "
            f"F1 {pct(row['f1_with_partial'])}" + (f" ({incomplete_text(entry)})" if entry else ""),
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
