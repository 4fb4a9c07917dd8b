"""Audit prompt version 3: a repo's prompts keep their cached prefix when matches take
findings out of the pool, and ask exactly the reference's questions (issue 38)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.judges.prompts import (
    PROMPT_V2,
    SHARED_WINDOW,
    SHOWN_EXTRA_MAX,
    build_user_prompt,
    build_user_prompt_v2,
    shown_span,
)
from scoring.audit.matching import RepoMatch, match_repo
from scoring.audit.schedule import match_repo_concurrent
from scoring.audit.types import ScanItem, TruthItem
from scoring.judges.llm import LLMConfig
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, context_overflow

VALID = re.compile(r"Valid indices: ([0-9, ]*)")
LISTED = re.compile(r'<finding index="(\d+)">')
VERIFIED_TITLE = re.compile(r"<verified_finding>\nTitle: (\S+)")


def _scans(n: int) -> list[ScanItem]:
    return [
        ScanItem(index=i, title=f"Finding {i}", description=f"Body of finding {i}. " * 15)
        for i in range(n)
    ]


def _listing(scans: list[ScanItem]) -> tuple[list[ScanItem], dict[int, int]]:
    return scans, {s.index: p for p, s in enumerate(scans)}


def _shared(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_a_batch_is_shown_from_the_start_of_its_window_to_its_last_finding() -> None:
    scans = _scans(25)
    listing, position = _listing(scans)
    # Findings 2 and 5 are taken: batch 1 is the first 10 free ones, batch 2 the next 10.
    free = [s for s in scans if s.index not in {2, 5}]
    first, second = free[:10], free[10:20]
    assert [s.index for s in shown_span(listing, position, first)] == list(range(12))
    # Batch 2 starts at finding 12, in the window [10, 20): shown from 10 (batch 1's last two
    # findings, judged in the other question) to its last finding, 21.
    assert [s.index for s in shown_span(listing, position, second)] == list(range(10, 22))
    assert SHARED_WINDOW == 10


def test_a_batch_that_is_not_a_span_of_the_listing_is_shown_alone() -> None:
    scans = _scans(30)
    listing, position = _listing(scans)
    # A pre-filtered order (the most similar findings first) is not the scanner's order.
    reordered = [scans[7], scans[3], scans[4]]
    assert shown_span(listing, position, reordered) == reordered
    # A finding of another repo (same index, other text) is not in this listing.
    stranger = [ScanItem(index=3, title="Another repo's finding")]
    assert shown_span(listing, position, stranger) == stranger
    # Past SHOWN_EXTRA_MAX other findings (many taken ones in the span), the batch alone.
    sparse = [scans[0], scans[SHOWN_EXTRA_MAX + 2]]
    assert shown_span(listing, position, sparse) == sparse
    assert shown_span(listing, position, []) == []


def test_version_3_keeps_the_whole_list_as_the_prefix_after_a_match() -> None:
    """Version 2 lost its prefix from the first finding a match took out of the batch."""
    scans = _scans(8)
    listing, position = _listing(scans)
    first = TruthItem(key=1, finding_id="H-1", title="Reentrancy", description="Drains funds.")
    second = TruthItem(key=2, finding_id="M-1", title="Rounding", description="Loses dust.")
    after_match = [s for s in scans if s.index != 2]  # the first truth matched finding 2
    v3_one = build_user_prompt(first, scans, shown_span(listing, position, scans))
    v3_two = build_user_prompt(second, after_match, shown_span(listing, position, after_match))
    v2_one = build_user_prompt_v2(first, scans)
    v2_two = build_user_prompt_v2(second, after_match)
    list_end = v3_one.index("</junior_findings>") + len("</junior_findings>")
    assert _shared(v3_one, v3_two) >= list_end
    assert _shared(v2_one, v2_two) < v2_one.index('<finding index="2">') + 30
    # What may be chosen is said after the list: the batch alone, never the taken finding.
    assert "Valid indices: 0, 1, 3, 4, 5, 6, 7 (or -1 for none)." in v3_two[list_end:]
    assert "Judge only the findings of the valid indices" in v3_two[list_end:]
    assert "Judge only" not in v3_one


def _matching_server(truth_matches: dict[str, int]) -> FakeOpenAI:
    """Answers "match" with the finding scripted for the verified title when it is valid."""

    def handler(body: dict[str, Any]) -> Any:
        user = body["messages"][1]["content"]
        valid = {int(i) for i in VALID.search(user).group(1).split(",")}  # type: ignore[union-attr]
        title = VERIFIED_TITLE.search(user).group(1)  # type: ignore[union-attr]
        hit = truth_matches.get(title, -1)
        hit = hit if hit in valid else -1
        verdict = {
            "is_match": hit != -1,
            "is_partial_match": False,
            "explanation": "same root cause" if hit != -1 else "nothing",
            "severity_from_junior_auditor": "High" if hit != -1 else "N/A",
            "severity_from_truth": "High",
            "index_of_finding_from_junior_auditor": hit,
        }
        return completion(json.dumps(verdict))

    return FakeOpenAI(handler)


def _run(
    server: FakeOpenAI,
    version: str,
    truths: list[TruthItem],
    scans: list[ScanItem],
    concurrent: bool,
) -> RepoMatch:
    config = LLMConfig(model="m", base_url=server.base_url, max_retries=0, timeout_s=5)
    judge = OpenAIAuditJudge(config=config, concurrency=1, prompt_version=version)
    judge.register("repo", truths, scans)
    matcher = match_repo_concurrent if concurrent else match_repo

    async def go() -> RepoMatch:
        try:
            return await matcher(judge, truths, scans, batch_size=10, iterations=1)
        finally:
            await judge.aclose()

    return asyncio.run(go())


def _asked(server: FakeOpenAI) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for request in server.requests:
        user = request["messages"][1]["content"]
        valid = tuple(int(i) for i in VALID.search(user).group(1).split(","))  # type: ignore[union-attr]
        out.append((VERIFIED_TITLE.search(user).group(1), valid))  # type: ignore[union-attr]
    return sorted(out)


def _prefix_share(server: FakeOpenAI) -> float:
    """Characters of each prompt that an earlier one started with, as a prefix cache keeps."""
    seen: list[str] = []
    shared = total = 0
    for request in server.requests:
        text = request["messages"][0]["content"] + request["messages"][1]["content"]
        shared += max((_shared(text, s) for s in seen), default=0)
        total += len(text)
        seen.append(text)
    return shared / total


def test_version_3_asks_the_reference_questions_and_shares_more_of_each_prompt() -> None:
    scans = _scans(24)
    truths = [
        TruthItem(key=k, finding_id=f"T{k}", title=f"T{k}", description="A verified issue. " * 5)
        for k in range(8)
    ]
    # Matches in the first window shift every later truth's batches under version 2.
    matches = {"T0": 3, "T1": 1, "T2": 15, "T4": 22, "T6": 0}
    results: dict[str, tuple[RepoMatch, list[tuple[str, tuple[int, ...]]], float]] = {}
    for version in (PROMPT_V2, "audit-match-v3"):
        with _matching_server(matches) as server:
            result = _run(server, version, truths, scans, concurrent=False)
            results[version] = (result, _asked(server), _prefix_share(server))
    (v2, v2_asked, v2_share), (v3, v3_asked, v3_share) = results.values()
    # The same questions (truth finding, findings to judge), so the same calls and outcomes.
    assert v3_asked == v2_asked
    assert v3.final == v2.final and v3.false_positives == v2.false_positives
    assert {o.truth_key: o.scan_index for o in v3.outcomes} == {
        o.truth_key: o.scan_index for o in v2.outcomes
    }
    assert v3_share > v2_share + 0.1, (v2_share, v3_share)


def test_version_3_under_the_concurrent_schedule_asks_the_same_questions() -> None:
    scans = _scans(17)
    truths = [
        TruthItem(key=k, finding_id=f"T{k}", title=f"T{k}", description="Issue.") for k in range(6)
    ]
    matches = {"T0": 2, "T2": 12, "T3": 4}
    asked = []
    for concurrent in (False, True):
        with _matching_server(matches) as server:
            result = _run(server, "audit-match-v3", truths, scans, concurrent=concurrent)
            asked.append((_asked(server), result.final))
    assert asked[0] == asked[1]


def test_a_span_too_long_for_the_context_is_asked_again_with_the_batch_alone() -> None:
    scans = _scans(8)
    truth = TruthItem(key="H-1", finding_id="H-1", title="Reentrancy", severity="High")

    def handler(body: dict[str, Any]) -> Any:
        listed = LISTED.findall(body["messages"][1]["content"])
        if len(listed) > 5:
            return context_overflow(1000 * len(listed), 5500)
        verdict = {
            "is_match": False, "is_partial_match": False, "explanation": "nothing",
            "severity_from_junior_auditor": "N/A", "severity_from_truth": "High",
            "index_of_finding_from_junior_auditor": -1,
        }  # fmt: skip
        return completion(json.dumps(verdict))

    with FakeOpenAI(handler) as server:
        config = LLMConfig(model="m", base_url=server.base_url, max_retries=0, timeout_s=5)
        judge = OpenAIAuditJudge(config=config, concurrency=1)
        judge.register("repo", [truth], scans)
        batch = scans[3:]  # findings 0-2 taken: the span lists all 8

        async def go() -> Any:
            try:
                return await judge.judge(truth, batch, vote_number=1)
            finally:
                await judge.aclose()

        verdict = asyncio.run(go())
        asked = [LISTED.findall(r["messages"][1]["content"]) for r in server.requests]
    assert verdict.index_of_finding_from_junior_auditor == -1
    assert [len(a) for a in asked] == [8, 5] and judge.splits == 0


def test_without_an_enforced_schema_the_batch_is_shown_alone() -> None:
    """A server that takes only json_object leaves the choice of index to the model: it is
    not shown findings it may not choose."""
    scans = _scans(8)
    truth = TruthItem(key="H-1", finding_id="H-1", title="Reentrancy", severity="High")
    batch = scans[3:]  # findings 0-2 taken
    shown = {}
    for json_mode in (False, True):
        config = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", json_mode=json_mode)
        judge = OpenAIAuditJudge(config=config, concurrency=1)
        judge.register("repo", [truth], scans)
        shown[json_mode] = [s.index for s in judge.shown(truth, batch)]
        asyncio.run(judge.aclose())
    assert shown == {False: list(range(8)), True: [3, 4, 5, 6, 7]}
