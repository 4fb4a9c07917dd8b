from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scoring.audit.matching import RepoMatch, match_repo, match_truth, postprocess
from scoring.audit.types import JUDGE_FAILED, MATCH, NONE, PARTIAL, TruthOutcome
from scoring.judges.consensus import VoteFailed
from tests.scoring.audit.helpers import ScriptedJudge, scans, truths


def _one(script: Any, *, pool: int = 3, iterations: int = 3) -> tuple[TruthOutcome, ScriptedJudge]:
    judge = ScriptedJudge(script)
    outcome = asyncio.run(
        match_truth(judge, truths(1)[0], scans(pool), batch_size=10, iterations=iterations)
    )
    return outcome, judge


def _votes(*answers: Any) -> Any:
    """Vote n answers answers[n-1] (a label, a (label, index) pair, or an exception)."""

    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        answer = answers[vote - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return script


@pytest.mark.parametrize(
    ("answers", "outcome", "index", "asked"),
    [
        # The first two agree: no third vote.
        ((("match", 1), ("match", 1), "none"), MATCH, 1, 2),
        ((("partial", 2), ("partial", 0), "none"), PARTIAL, 2, 2),
        (("none", "none", ("match", 1)), NONE, None, 2),
        # They disagree: the third decides by majority.
        ((("match", 1), "none", ("match", 2)), MATCH, 1, 3),
        (("none", ("match", 1), "none"), NONE, None, 3),
        ((("partial", 0), ("match", 1), ("partial", 2)), PARTIAL, 0, 3),
        # 1 exact + 1 partial + 1 neither → partial (whatever the order).
        ((("match", 1), "none", ("partial", 2)), PARTIAL, 2, 3),
        (("none", ("partial", 0), ("match", 1)), PARTIAL, 0, 3),
    ],
)
def test_consensus_cases(answers: Any, outcome: str, index: int | None, asked: int) -> None:
    result, judge = _one(_votes(*answers))
    assert (result.outcome, result.scan_index) == (outcome, index)
    assert len(judge.asked) == asked
    assert [v.number for v in result.votes] == list(range(1, asked + 1))


def test_two_iterations_split_takes_first_response() -> None:
    result, _ = _one(_votes(("partial", 1), ("match", 2)), iterations=2)
    assert (result.outcome, result.scan_index) == (PARTIAL, 1)


def test_failed_vote_without_majority_is_judge_failed_never_a_miss() -> None:
    result, _ = _one(_votes(("match", 1), VoteFailed("timeout"), ("partial", 2)))
    assert result.outcome == JUDGE_FAILED and result.scan_index is None
    assert [v.label for v in result.votes] == ["match", None, "partial"]
    assert result.votes[1].error == "timeout"


def test_failed_vote_outvoted_by_two_valid_votes() -> None:
    result, _ = _one(_votes(VoteFailed("x"), ("match", 1), ("match", 1)))
    assert (result.outcome, result.scan_index) == (MATCH, 1)


@pytest.mark.parametrize("bad_index", [-1, 7])
def test_invalid_index_is_asked_again_then_a_failed_vote(bad_index: int) -> None:
    result, judge = _one(lambda key, batch, vote: ("match", bad_index), pool=3)
    assert result.outcome == JUDGE_FAILED
    # Each of the three votes was asked twice (the re-ask), none counted as a match.
    assert len(judge.asked) == 6
    assert {r.status for r in judge.records} == {"invalid"}
    assert all(v.label is None and "not one of" in v.error for v in result.votes)


def test_invalid_index_recovers_when_the_reask_is_valid() -> None:
    answers = iter([("match", -1), ("match", 2), ("match", 2)])
    result, judge = _one(lambda key, batch, vote: next(answers))
    assert (result.outcome, result.scan_index) == (MATCH, 2)
    assert [r.status for r in judge.records] == ["invalid", "ok", "ok"]


def test_batches_in_order_and_first_partial_kept_until_an_exact() -> None:
    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        if 3 in batch:
            return ("partial", 3)
        if 14 in batch:
            return ("partial", 14)
        if 22 in batch:
            return ("match", 22)
        return "none"

    judge = ScriptedJudge(script)
    outcome = asyncio.run(match_truth(judge, truths(1)[0], scans(25), batch_size=10))
    assert (outcome.outcome, outcome.scan_index) == (MATCH, 22)
    assert [a[1] for a in judge.asked[::2]] == [
        tuple(range(10)),
        tuple(range(10, 20)),
        tuple(range(20, 25)),
    ]
    judge2 = ScriptedJudge(lambda k, b, v: ("partial", 3) if 3 in b else "none")
    outcome2 = asyncio.run(match_truth(judge2, truths(1)[0], scans(25), batch_size=10))
    assert (outcome2.outcome, outcome2.scan_index) == (PARTIAL, 3)
    assert len(judge2.asked) == 6  # all three batches were still searched for an exact match


def test_exact_match_stops_search_and_is_one_to_one() -> None:
    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        return ("match", 1) if 1 in batch else "none"

    judge = ScriptedJudge(script)
    result = asyncio.run(match_repo(judge, truths(2), scans(15), batch_size=10))
    assert [(o.outcome, o.scan_index) for o in result.outcomes] == [(MATCH, 1), (NONE, None)]
    first = [a for a in judge.asked if a[0] == "T0"]
    second = [a for a in judge.asked if a[0] == "T1"]
    assert len(first) == 2  # stopped after the first batch
    assert 1 not in second[0][1] and second[0][1] == (0, *range(2, 11))
    assert result.final == {"T0": MATCH, "T1": NONE}
    assert result.false_positives == [i for i in range(15) if i != 1]


def _o(key: str, outcome: str, index: int | None) -> TruthOutcome:
    return TruthOutcome(truth_key=key, outcome=outcome, scan_index=index, finding_id=key)


def test_postprocess_drops_partial_on_exact_used_finding_with_note() -> None:
    result = postprocess([_o("A", PARTIAL, 2), _o("B", MATCH, 2)], scans(4))
    assert result.final == {"A": NONE, "B": MATCH}
    assert len(result.notes) == 1 and "A" in result.notes[0] and "exactly" in result.notes[0]
    assert result.false_positives == [0, 1, 3]


def test_postprocess_keeps_only_first_partial_per_scan_finding() -> None:
    result = postprocess([_o("A", PARTIAL, 1), _o("B", PARTIAL, 1), _o("C", PARTIAL, 3)], scans(4))
    assert result.final == {"A": PARTIAL, "B": NONE, "C": PARTIAL}
    assert "already holds a partial" in result.notes[0]
    assert result.count(PARTIAL) == 2
    assert result.false_positives == [0, 2]


def test_false_positives_exclude_qa_findings() -> None:
    result = postprocess([_o("A", MATCH, 0)], scans(5, qa=[3, 4]))
    assert result.false_positives == [1, 2]


def test_judge_failure_stops_the_repo_and_resume_redoes_only_what_is_missing() -> None:
    broken = {"on": True}

    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        if key == "T1" and broken["on"]:
            raise VoteFailed("503 from the API")
        return {"T0": ("match", 0), "T1": ("match", 1), "T2": "none"}[key]

    judge = ScriptedJudge(script)
    first = asyncio.run(match_repo(judge, truths(3), scans(3)))
    # T2 is not judged behind the failed T1: neither an outcome nor a miss.
    assert [o.outcome for o in first.outcomes] == [MATCH, JUDGE_FAILED]
    assert first.pending == ["T2"] and not first.is_complete
    assert {a[0] for a in judge.asked} == {"T0", "T1"}
    assert first.count(JUDGE_FAILED) == 1 and first.count(NONE) == 0
    assert any("T2" not in n and "1 later truth finding" in n for n in first.notes)
    # The failed truth finding keeps its scan finding available: it is not a miss or an FP fix.
    assert first.false_positives == [1, 2]

    broken["on"] = False
    saved: list[TruthOutcome] = []

    async def on_outcome(o: TruthOutcome) -> None:
        saved.append(o)

    judge2 = ScriptedJudge(script)
    second = asyncio.run(
        match_repo(judge2, truths(3), scans(3), done=first.outcomes, on_outcome=on_outcome)
    )
    assert {a[0] for a in judge2.asked} == {"T1", "T2"}  # T0 is kept, not asked again
    assert [o.truth_key for o in saved] == ["T1", "T2"]
    assert [(o.outcome, o.scan_index) for o in second.outcomes] == [
        (MATCH, 0),
        (MATCH, 1),
        (NONE, None),
    ]
    assert second.is_complete and second.pending == [] and second.notes == []
    assert second.false_positives == [2]


def test_resume_keeps_matches_of_truths_judged_after_a_gap_one_to_one() -> None:
    # Runs stored before a failure stopped the repo may hold outcomes after a failed one;
    # their matches stay taken, so that no scan finding is matched twice.
    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        return ("match", 0) if 0 in batch else "none"

    done = [_o("T0", JUDGE_FAILED, None), _o("T1", MATCH, 0)]
    judge = ScriptedJudge(script)
    result = asyncio.run(match_repo(judge, truths(2), scans(2), done=done))
    assert all(0 not in a[1] for a in judge.asked)
    assert result.final == {"T0": NONE, "T1": MATCH}


def _summary(m: RepoMatch) -> tuple[Any, ...]:
    return (
        [(o.truth_key, o.outcome, o.scan_index) for o in m.outcomes],
        m.final,
        m.false_positives,
        m.pending,
    )


def _fails_on(target: str, script: Any, times: int) -> Any:
    """``script``, except that every vote on ``target`` fails in the first ``times``
    attempts (an attempt: one match_repo call, counted by ``attempt["n"]``)."""
    attempt = {"n": 0}

    def wrapped(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        if key == target and attempt["n"] < times:
            raise VoteFailed("429 rate limited")
        return script(key, batch, vote)

    wrapped.attempt = attempt  # type: ignore[attr-defined]
    return wrapped


def _attempts(script: Any, n_truths: int, n_scans: int, **kw: Any) -> tuple[RepoMatch, list[Any]]:
    """Run and resume (done: the final outcomes saved so far) until the repo is complete."""
    saved: list[TruthOutcome] = []

    async def on_outcome(o: TruthOutcome) -> None:
        saved.append(o)

    for n in range(5):
        script.attempt["n"] = n
        done = [o for o in saved if not o.failed]
        result = asyncio.run(
            match_repo(
                ScriptedJudge(script),
                truths(n_truths),
                scans(n_scans),
                done=done,
                on_outcome=on_outcome,
                **kw,
            )
        )
        if result.is_complete:
            return result, saved
    raise AssertionError("never completed")


def test_review_case_failed_then_resumed_equals_uninterrupted() -> None:
    # Both truths match scan #0 exactly; T0 is partial on #1 once #0 is gone. Matching T1
    # past T0's failure would give #0 to T1, and the resumed T0 a partial on #1.
    def script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
        if 0 in batch:
            return ("match", 0)
        return ("partial", 1) if key == "T0" and 1 in batch else "none"

    clean = asyncio.run(match_repo(ScriptedJudge(script), truths(2), scans(2)))
    assert clean.final == {"T0": MATCH, "T1": NONE} and clean.false_positives == [1]
    resumed, saved = _attempts(_fails_on("T0", script, times=1), 2, 2)
    assert _summary(resumed) == _summary(clean)
    assert [(o.truth_key, o.outcome) for o in saved] == [
        ("T0", JUDGE_FAILED),
        ("T0", MATCH),
        ("T1", NONE),
    ]


# Which scan findings each truth finding claims, in order of preference; the first one still
# in the batch answers (exact matches compete for the same findings across truths).
PREFERENCES: dict[str, list[tuple[str, int]]] = {
    "T0": [("match", 2), ("partial", 5)],
    "T1": [("match", 2), ("partial", 0)],
    "T2": [("partial", 5), ("match", 0)],
    "T3": [("match", 0), ("match", 5), ("partial", 1)],
    "T4": [("partial", 1)],
    "T5": [("match", 5), ("match", 3)],
}


def _preferences(key: Any, batch: tuple[int, ...], vote: int) -> Any:
    for label, index in PREFERENCES[key]:
        if index in batch:
            return (label, index)
    return "none"


@pytest.mark.parametrize("batch_size", [10, 2])
@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("target", sorted(PREFERENCES))
def test_failure_anywhere_then_resume_equals_uninterrupted(
    target: str, times: int, batch_size: int
) -> None:
    clean = asyncio.run(
        match_repo(ScriptedJudge(_preferences), truths(6), scans(7), batch_size=batch_size)
    )
    assert clean.count(MATCH) >= 3 and clean.count(PARTIAL) >= 1  # the case is not trivial
    resumed, saved = _attempts(_fails_on(target, _preferences, times), 6, 7, batch_size=batch_size)
    assert _summary(resumed) == _summary(clean)
    # Progress: every truth finding got exactly one final outcome across the attempts, and
    # only the failed one was ever recorded as failed.
    final = [o.truth_key for o in saved if not o.failed]
    assert sorted(final) == sorted(PREFERENCES) and len(final) == len(set(final))
    assert [o.truth_key for o in saved if o.failed] == [target] * times


def test_empty_pool_is_not_found_without_calls() -> None:
    judge = ScriptedJudge(lambda k, b, v: "none")
    result = asyncio.run(match_repo(judge, truths(2), []))
    assert [o.outcome for o in result.outcomes] == [NONE, NONE] and judge.asked == []
    # A scanner that reported nothing: no false positives, and the run page says why.
    assert result.false_positives == [] and result.is_complete
    assert any("no findings" in n for n in result.notes)
