from __future__ import annotations

import pytest

from scoring.audit.metrics import (
    RATIO_KEYS,
    build_report,
    overall,
    render_markdown,
    repo_metrics,
)


def _row(repo: str, **kw: object) -> dict:
    return repo_metrics(repo=repo, **kw)  # type: ignore[arg-type]


def test_repo_metrics_formulas_and_qa_exclusion() -> None:
    row = _row(
        "r",
        truth_severities=["High", "Medium", "Low", "Info"],
        scan_severities=["High", "High", "Low", "Info", "Best Practices"],
        tp=1,
        partial=1,
    )
    assert (row["truth"], row["scan"], row["qa"]) == (4, 5, 2)
    assert (row["fp"], row["fn"]) == (3, 3)
    assert row["precision"] == pytest.approx(1 / 5)
    assert row["recall"] == pytest.approx(1 / 4)
    assert row["f1"] == pytest.approx(2 * 0.2 * 0.25 / 0.45)
    # QA findings leave the with-partial precision denominator: (1+1)/(5-2).
    assert row["precision_with_partial"] == pytest.approx(2 / 3)
    assert row["recall_with_partial"] == pytest.approx(2 / 4)
    assert row["scan_severity_counts"] == {
        "high": 2,
        "medium": 0,
        "low": 1,
        "info": 1,
        "bestpractices": 1,
    }


def test_judge_failed_is_not_a_miss_but_stays_in_truth() -> None:
    row = _row(
        "r",
        truth_severities=["High"] * 4,
        scan_severities=["High"],
        tp=1,
        partial=0,
        judge_failed=2,
    )
    assert row["truth"] == 4 and row["fn"] == 1 and row["recall"] == pytest.approx(0.25)


def test_truths_left_behind_a_failure_are_not_misses_either() -> None:
    row = _row(
        "r",
        truth_severities=["High"] * 5,
        scan_severities=["High"] * 2,
        tp=1,
        partial=0,
        judge_failed=1,
        not_judged=2,
    )
    assert (row["truth"], row["fn"], row["judge_failed"], row["not_judged"]) == (5, 1, 1, 2)
    assert row["recall"] == pytest.approx(1 / 5)


def test_a_scanner_that_found_nothing_has_zero_ratios_and_renders() -> None:
    empty = _row("r", truth_severities=["High"] * 3, scan_severities=[], tp=0, partial=0)
    assert (empty["scan"], empty["qa"], empty["fp"], empty["fn"]) == (0, 0, 0, 3)
    assert all(empty[k] == 0.0 for k in RATIO_KEYS)
    report = build_report(scanner="s", run=1, repo_rows=[empty])
    assert report["overall"]["precision"] == 0.0 and report["overall"]["fn"] == 3
    assert "| r | 3 | 0 | 0 | 0 | 0 | 0 | 3 | 0.0% | 0.0% | 0.0% |" in render_markdown(report)


def test_overall_sums_counts_before_ratios() -> None:
    a = _row("a", truth_severities=["High"] * 10, scan_severities=["High"] * 2, tp=2, partial=0)
    b = _row("b", truth_severities=["High"] * 2, scan_severities=["High"] * 18, tp=0, partial=0)
    total = overall([a, b])
    assert (total["truth"], total["scan"], total["tp"]) == (12, 20, 2)
    assert total["precision"] == pytest.approx(2 / 20)  # not the mean of 1.0 and 0.0
    assert total["recall"] == pytest.approx(2 / 12)


def test_zero_denominators_give_zero() -> None:
    row = _row("r", truth_severities=[], scan_severities=["Info"], tp=0, partial=0)
    assert row["precision_with_partial"] == 0.0 and row["recall"] == 0.0 and row["f1"] == 0.0


def test_report_json_keys_and_markdown_table() -> None:
    a = _row("repo-a", truth_severities=["High"] * 6, scan_severities=["High"] * 3, tp=1, partial=1)
    report = build_report(scanner="s", run=7, repo_rows=[a])
    assert list(report["repos"][0]) == [
        "repo",
        "truth",
        "scan",
        "qa",
        "tp",
        "partial",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        "precision_with_partial",
        "recall_with_partial",
        "f1_with_partial",
        "truth_severity_counts",
        "scan_severity_counts",
    ]
    assert report["overall"]["repo"] == "ALL" and report["run"] == 7
    md = render_markdown(report)
    assert "| Repo | Truth | AI Scan | QA | TP | Partial | FP | FN | Precision | Recall | F1 " in md
    assert (
        "| repo-a | 6 | 3 | 0 | 1 | 1 | 1 | 5 | 33.3% | 16.7% | 22.2% | 66.7% | 33.3% | 44.4% |"
        in md
    )
    assert "| **ALL** |" in md and "## repo-a" in md
