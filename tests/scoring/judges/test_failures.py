"""Failure causes of a run's items: counted per item, and advice that says when to resume."""

from __future__ import annotations

from scoring.judges import failures
from scoring.judges.failures import details, headline, summarize_items, tag

CONTEXT_400 = tag(
    failures.CONTEXT,
    "BadRequestError: HTTP 400 request (12914 tokens) exceeds the available context size "
    "(8192 tokens) (prompt 12,914 tokens, context 8,192)",
)


def test_an_item_counts_once_per_cause_whatever_its_votes() -> None:
    causes = summarize_items(
        [
            [CONTEXT_400, CONTEXT_400],  # two votes, one item
            [CONTEXT_400],
            [
                tag(failures.TRANSIENT, "APITimeoutError: Request timed out. (req_abc 1.5 s)"),
                tag(failures.TRANSIENT, "APITimeoutError: Request timed out. (req_xyz 30 s)"),
            ],
            [],  # an item without any reason adds no cause
        ]
    )
    assert [(c.kind, c.count) for c in causes] == [("context", 2), ("transient", 1)]
    assert "12,914" in causes[0].message and not causes[0].resumable
    assert causes[1].resumable
    # The raw summary counts votes, not items.
    assert failures.summarize([CONTEXT_400, CONTEXT_400, CONTEXT_400])[0].count == 3


def test_headline_advises_resume_only_for_causes_a_resume_fixes() -> None:
    permanent = headline(summarize_items([[CONTEXT_400]]), failed_items=1)
    assert permanent.startswith("1 item(s) could not be judged. Causes: 1 x BadRequestError")
    assert "resume" not in permanent.lower()
    assert "llama-server -c N" in permanent and "JUDGE_MAX_ANSWER_TOKENS" in permanent
    truncated = headline(
        summarize_items([[tag(failures.TRUNCATED, "invalid answer twice: answer cut")]]), 1
    )
    assert "resume" not in truncated.lower() and "raise JUDGE_MAX_ANSWER_TOKENS" in truncated

    transient = headline(
        summarize_items([[tag(failures.TRANSIENT, "InternalServerError: HTTP 503 busy")]]), 1
    )
    assert "resume the run to judge these" in transient


def test_details_mark_what_resuming_fixes_and_what_needs_a_change_first() -> None:
    causes = summarize_items(
        [[CONTEXT_400], [tag(failures.INVALID, "invalid answer twice: not JSON")], ["untagged"]]
    )
    text = details(causes)
    lines = text.splitlines()
    assert lines[0].startswith("  1 x context: BadRequestError: HTTP 400")
    assert lines[1].startswith("      fix first: The prompt does not fit")
    invalid = lines.index("  1 x invalid: invalid answer twice: not JSON")
    assert lines[invalid + 1].startswith("      resumable: The model answered outside")
    assert "  1 x other: untagged" in lines
    assert details([]) == ""


def test_a_reason_quoting_its_advice_is_shown_without_the_quote() -> None:
    quoted = f"{CONTEXT_400}; even one scan finding does not fit: {failures.ADVICE['context']}"
    (cause,) = summarize_items([[quoted], [CONTEXT_400 + "; even one scan finding does not fit"]])
    assert cause.count == 2
    assert cause.message.endswith("context 8,192); even one scan finding does not fit")
    assert failures.ADVICE["context"] == cause.advice and cause.advice not in cause.message


def test_failures_differing_only_in_numbers_are_one_cause_with_the_range() -> None:
    reasons = [
        [
            tag(
                failures.CONTEXT,
                f"BadRequestError: HTTP 400 request ({n} tokens) exceeds the available context "
                f"size (4096 tokens) (prompt {n:,} tokens, context 4,096)",
            )
        ]
        for n in range(5000, 5015)
    ]
    causes = summarize_items(reasons)
    assert len(causes) == 1 and causes[0].count == 15
    assert "prompt 5,000 to 5,014 tokens, context 4,096" in causes[0].message
    assert "HTTP 400" in causes[0].message
    text = headline(causes, failed_items=15)
    assert text.count("JUDGE_MAX_ANSWER_TOKENS") == 1 and len(text) < 700
    # Different HTTP statuses stay different causes.
    two = summarize_items(
        [[tag(failures.TRANSIENT, f"InternalServerError: HTTP {s} busy")] for s in (500, 503)]
    )
    assert len(two) == 2
