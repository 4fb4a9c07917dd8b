"""The offline audit judge's z-score rule on small repos, where a relative rule can break."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from scoring.audit.judges import OfflineAuditJudge, OfflineParams
from scoring.audit.judges.offline import standardize
from scoring.audit.matching import match_repo
from scoring.audit.types import MATCH, NONE, ScanItem, TruthItem

REENTRANCY_T = TruthItem(
    1, "H-01", "Reentrancy in withdraw", "Vault.withdraw sends ETH before updating balances."
)
ORACLE_T = TruthItem(
    2, "M-01", "Oracle price staleness", "Oracle.getPrice never checks updatedAt: stale prices."
)
REENTRANCY_S = ScanItem(
    0,
    "Reentrancy in withdraw allows draining",
    "Vault.withdraw sends ETH before updating balances; re-enter to drain.",
)
ORACLE_S = ScanItem(
    1, "Oracle price staleness", "Oracle.getPrice does not check updatedAt; stale prices accepted."
)
GAS_S = ScanItem(2, "Unbounded loop in distribute", "Gas grows with the number of holders.")


def _final(truths: list[TruthItem], scans: list[ScanItem]) -> dict[object, str]:
    judge = OfflineAuditJudge()
    judge.register("repo", truths, scans)
    return asyncio.run(match_repo(judge, truths, scans)).final


def test_two_matches_in_a_two_by_two_repo_do_not_drown_each_other() -> None:
    # Without the leave-out and the cap, each match raises the other's baseline to z ≈ 4.
    final = _final([REENTRANCY_T, ORACLE_T], [ORACLE_S, REENTRANCY_S])
    assert final == {1: MATCH, 2: MATCH}


def test_a_lone_pair_is_judged_against_the_prior() -> None:
    assert _final([REENTRANCY_T], [REENTRANCY_S]) == {1: MATCH}
    assert _final([REENTRANCY_T], [GAS_S]) == {1: NONE}


def test_an_unregistered_batch_is_scored_on_its_own() -> None:
    verdict = OfflineAuditJudge().decide(ORACLE_T, [GAS_S, ORACLE_S, REENTRANCY_S])
    assert verdict.is_match and verdict.index_of_finding_from_junior_auditor == 1
    assert "standard deviations" in verdict.explanation and "similarity" in verdict.explanation
    unrelated = OfflineAuditJudge().decide(ORACLE_T, [GAS_S, REENTRANCY_S])
    assert not unrelated.is_match and not unrelated.is_partial_match


def test_standardize_leaves_the_pair_out_and_caps_the_others() -> None:
    params = OfflineParams(prior_mean=0.05, prior_std=0.05, prior_weight=20.0, clip_sd=4.0)
    m = np.zeros((6, 10))
    m[0, 0] = 0.9
    m[1, 1] = 0.8
    z = standardize(m, params)
    # Baseline of [0, 0]: 58 zeros, 0.8 capped at 0.25, and 20 prior pairs.
    others = [0.0] * 58 + [0.25]
    n = len(others) + 20
    mean = (sum(others) + 20 * 0.05) / n
    var = (sum(x * x for x in others) + 20 * (0.05**2 + 0.05**2)) / n - mean**2
    assert z[0, 0] == pytest.approx((0.9 - mean) / var**0.5)
    # Raising one match's similarity does not lower the other's score (it is capped).
    m[0, 0] = 1.0
    assert standardize(m, params)[1, 1] == pytest.approx(z[1, 1])
    assert standardize(m, OfflineParams(standardize=False)) is not None
    assert (standardize(m, OfflineParams(standardize=False)) == m).all()


def test_thresholds_apply_to_the_best_score() -> None:
    params = OfflineParams(exact=5.0, partial=4.0)
    assert [params.label(x) for x in (5.0, 4.5, 3.9)] == ["match", "partial", "none"]
    assert OfflineParams(exact=5.0, partial=5.0).label(4.9) == "none"
    assert "no partial" in OfflineParams().describe()
