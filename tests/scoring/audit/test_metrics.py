from __future__ import annotations

import pytest

from scoring.audit.metrics import (
    INCOMPLETE_NOTE,
    RATIO_KEYS,
    as_shown,
    build_report,
    is_row_complete,
    judged,
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
    assert row["truth"] == 4 and row["fn"] == 1
    # Incomplete: no recall over truth findings that were never judged (see below).
    assert row["recall"] is None


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
    assert row["recall"] is None and row["precision"] is None


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


def _issue_17_repo() -> dict:
    # 1 of 16 truth findings judged (a match); the judge failed on the second, 14 wait.
    return _row(
        "big",
        truth_severities=["High"] * 16,
        scan_severities=["High"] * 17,
        tp=1,
        partial=0,
        judge_failed=1,
        not_judged=14,
    )


def test_an_incomplete_repo_has_no_ratios_rather_than_ones_over_unjudged_findings() -> None:
    row = _issue_17_repo()
    # Before: precision 1/17 = 5.9%, every unmatched scan finding counted as a false positive.
    assert all(row[k] is None for k in RATIO_KEYS)
    assert row["fp"] is None
    assert (row["tp"], row["fn"], row["truth"], row["scan"]) == (1, 0, 16, 17)
    assert judged(row) == 1 and not is_row_complete(row)


def test_overall_has_no_ratios_when_any_repo_is_incomplete() -> None:
    done = _row("done", truth_severities=["High"] * 2, scan_severities=["High"], tp=1, partial=0)
    total = overall([done, _issue_17_repo()])
    assert (total["truth"], total["tp"], total["judge_failed"], total["not_judged"]) == (
        18,
        2,
        1,
        14,
    )
    assert all(total[k] is None for k in RATIO_KEYS) and total["fp"] is None
    assert overall([done])["precision"] == pytest.approx(1.0)


def test_report_says_how_much_was_judged_and_shows_dashes() -> None:
    done = _row("done", truth_severities=["High"] * 2, scan_severities=["High"], tp=1, partial=0)
    report = build_report(scanner="s", run=3, repo_rows=[done, _issue_17_repo()])
    assert report["is_complete"] is False
    assert report["incomplete"] == [
        {"repo": "big", "truth": 16, "judged": 1, "judge_failed": 1, "not_judged": 14}
    ]
    assert report["note"] == INCOMPLETE_NOTE
    by_repo = {r["repo"]: r for r in report["repos"]}
    assert by_repo["big"]["precision"] is None and by_repo["done"]["precision"] == 1.0
    # The rows keep the reference layout; the JSON carries null, not a number.
    assert list(by_repo["big"]) == list(by_repo["done"])
    assert report["overall"]["f1_with_partial"] is None
    md = render_markdown(report)
    assert "5.9%" not in md
    assert "only 1 of 16 truth findings of 1 repo(s) were judged (big: 1 of 16)" in md
    assert "not known to be false positives" in md
    assert "| big | 16 | 17 | 0 | 1 | 0 | — | 0 | — | — | — | — | — | — |" in md
    assert "(incomplete: 1 of 16 truth findings judged)" in md
    assert "| done | 2 | 1 | 0 | 1 | 0 | 0 | 1 | 100.0% | 50.0% | 66.7% |" in md


def test_rows_stored_with_ratios_before_are_shown_without_them() -> None:
    stored = {**_issue_17_repo(), "precision": 1 / 17, "fp": 16}  # as older runs stored it
    shown = as_shown(stored)
    assert shown["precision"] is None and shown["fp"] is None
    assert stored["precision"] == pytest.approx(1 / 17)  # the stored row is left alone
    complete = _row("c", truth_severities=["High"], scan_severities=["High"], tp=1, partial=0)
    assert as_shown(complete) is complete
    report = build_report(scanner="s", run=1, repo_rows=[stored])
    assert report["repos"][0]["precision"] is None
