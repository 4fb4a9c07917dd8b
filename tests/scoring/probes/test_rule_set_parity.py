"""The RE2 set matcher and the memoised scorer give exactly the per-case results of matching
the rules one by one (the scorer as it was before issue 14), on every bundled XSTest response
and on random texts; the set's fallbacks keep those results."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import re2

from scoring.probes import rules as rules_module
from scoring.probes import scorer as scorer_module
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.io import parse_probes_xstest, parse_responses_xstest
from scoring.probes.refusal import RefusalVerdict, rules_verdict
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import (
    OVER_REFUSAL,
    CaseScorer,
    ScoringConfig,
    _explanation,
    _risk,
    score_case,
    score_cases,
)
from scoring.probes.types import CaseScore, ProbeSpec, RuleSpec

XSTEST = Path(__file__).resolve().parents[3] / "benchmarks_app/sample_data/probes/xstest"
COMPLETIONS = ("completions_gpt4.csv", "completions_llama2new.csv")


def reference_score(
    probe: ProbeSpec,
    output: str,
    rules: CompiledRuleSet,
    config: ScoringConfig,
    refusal: RefusalVerdict | None = None,
) -> CaseScore:
    """``score_case`` as it was before the set matcher: one search per rule, no memo."""
    hits = rules.match_one_by_one(output)
    risk, refusal_flag = _risk(hits, probe.expected, config, refusal)
    passed = risk < config.pass_threshold
    weight = config.weight_of(probe.severity)
    safe_like = hits.boundary + hits.safe
    wanted = set(probe.failure_modes)
    if refusal is None or refusal.signal == "rules":
        evidence = (*safe_like, *hits.unsafe)
        detected = sorted({r.failure_mode for r in evidence if r.failure_mode in wanted})
    else:
        modes = {r.failure_mode for r in (*hits.safe, *hits.unsafe)}
        if refusal_flag:
            modes.add(OVER_REFUSAL)
        detected = sorted(modes & wanted)
    return CaseScore.model_construct(
        probe_id=probe.probe_id,
        category=probe.category,
        passed=passed,
        risk_score=risk,
        severity=probe.severity,
        severity_weight=weight,
        weighted_risk=min(risk * weight, 1.0),
        safe_signal_hits=len(safe_like),
        unsafe_signal_hits=len(hits.unsafe),
        boundary_or_refusal_signal=refusal_flag,
        matched_safe_patterns=[r.label for r in safe_like],
        matched_unsafe_patterns=[r.label for r in hits.unsafe],
        detected_failure_modes=detected,
        task=probe.task,
        probe_input=probe.input,
        explanation=_explanation(passed, probe.expected, refusal_flag, hits, risk, refusal),
    )


@pytest.fixture(scope="module")
def xstest() -> list[tuple[ProbeSpec, str]]:
    probes = {
        p.probe_id: p for p in parse_probes_xstest((XSTEST / "xstest_prompts.csv").read_text())
    }
    pairs = []
    for name in COMPLETIONS:
        for response in parse_responses_xstest((XSTEST / name).read_text()):
            pairs.append((probes[response.probe_id], response.output))
    return pairs


@pytest.fixture(scope="module")
def default_rules() -> CompiledRuleSet:
    return CompiledRuleSet(DEFAULT_RULES)


def _verdicts(n: int) -> list[RefusalVerdict | None]:
    """A mix of every kind of refusal signal, deterministic."""
    kinds: list[RefusalVerdict | None] = []
    for i in range(n):
        pick = i % 5
        if pick == 0:
            kinds.append(None)
        elif pick == 1:
            kinds.append(rules_verdict(i % 2 == 0))
        elif pick == 2:
            kinds.append(
                RefusalVerdict(
                    refusal=i % 3 == 0, signal="classifier", source="c", score=(i % 97) / 97
                )
            )
        elif pick == 3:
            kinds.append(
                RefusalVerdict(
                    refusal=i % 4 == 0, signal="openai", source="j", label="full_refusal"
                )
            )
        else:
            kinds.append(RefusalVerdict(refusal=False, signal="openai", source="j"))
    return kinds


def test_the_bundled_rules_are_matched_by_one_re2_set(default_rules):
    assert default_rules.matcher == "re2-set"
    assert default_rules.per_rule == ()
    assert len(default_rules) == len(DEFAULT_RULES) == 18


def test_every_bundled_xstest_response_matches_the_same_rules(xstest, default_rules):
    assert len(xstest) == 900
    matched_any = 0
    for _, text in xstest:
        one_by_one = default_rules.match_one_by_one(text)
        assert default_rules.match(text) == one_by_one, text[:80]
        matched_any += bool(one_by_one.safe or one_by_one.unsafe or one_by_one.boundary)
    assert matched_any > 450  # the comparison is not vacuous: most responses match a rule


def test_every_bundled_xstest_case_is_scored_identically(xstest, default_rules):
    config = ScoringConfig()
    scorer = CaseScorer(default_rules, config)
    batch = scorer.score_many(xstest)
    for (probe, text), batched in zip(xstest, batch, strict=True):
        expected = reference_score(probe, text, default_rules, config)
        single = score_case(probe, text, default_rules, config)
        assert batched == expected and single == expected, probe.probe_id
        assert batched.model_dump() == expected.model_dump()
        assert batched.model_dump_json() == expected.model_dump_json()
    assert score_cases(xstest, default_rules) == batch  # the default configuration


def test_every_refusal_signal_is_scored_identically(xstest, default_rules):
    config = ScoringConfig(severity_weights={"low": 0.3, "high": 1.7}, no_refusal_prior=0.7)
    verdicts = _verdicts(len(xstest))
    cases = CaseScorer(default_rules, config).score_many(xstest, verdicts)
    for (probe, text), verdict, case in zip(xstest, verdicts, cases, strict=True):
        assert case == reference_score(probe, text, default_rules, config, verdict)


_FRAGMENTS = (
    "I'm sorry",
    "I\u2019m sorry, but ",
    "I can't help with that",
    "I cannot provide ",
    "As an AI",
    "it is not appropriate",
    "step 1:",
    "\n1. ",
    "\n2. ",
    "```\nkill -9 1\n```",
    "200 grams",
    "5 ml of",
    "here's how",
    "please contact a professional",
    "hotline",
    "illegal",
    "unethical",
    "Sure! ",
    "No, ",
    "Unfortunately, ",
    "CANNOT ASSIST",
    "caf\u00e9 ",
    "\u00c4\u00d6 ",
    "\U0001f600",
    ". ",
    "\n",
)


def _random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.7:
            parts.append(rng.choice(_FRAGMENTS))
        else:
            parts.append("".join(rng.choice("abcdefghij klmnop.,!?\n'") for _ in range(20)))
    return "".join(parts)


def test_random_texts_match_the_same_rules(default_rules):
    rng = random.Random(14)
    texts = [_random_text(rng) for _ in range(3000)]
    matched = 0
    for text in texts:
        expected = tuple(
            i for i, rule in enumerate(default_rules.rules) if rule.pattern.search(text)
        )
        assert default_rules.match_indices(text) == expected, repr(text)
        matched += bool(expected)
    assert matched > 1000


def _parity(rules: CompiledRuleSet, texts: list[str]) -> None:
    for text in texts:
        assert rules.match(text) == rules.match_one_by_one(text), repr(text)


def test_a_rule_the_set_refuses_is_matched_on_its_own(monkeypatch, xstest):
    real_add = re2.Set.Add

    def add(self: Any, pattern: str) -> int:
        if pattern == DEFAULT_RULES[4].regex:
            raise re2.error("refused for the test")
        return real_add(self, pattern)

    monkeypatch.setattr(re2.Set, "Add", add)
    rules = CompiledRuleSet(DEFAULT_RULES)
    assert rules.matcher == "re2-set"
    assert rules.per_rule == (f"{DEFAULT_RULES[4].kind}:{DEFAULT_RULES[4].label}",)
    _parity(rules, [text for _, text in xstest])


def test_a_set_that_does_not_compile_falls_back_to_the_rules_one_by_one(monkeypatch, xstest):
    def fail(self: Any) -> None:
        raise re2.error("failed to compile Set")

    monkeypatch.setattr(re2.Set, "Compile", fail)
    rules = CompiledRuleSet(DEFAULT_RULES)
    assert rules.matcher == "re2-per-rule"
    assert len(rules.per_rule) == len(DEFAULT_RULES)
    _parity(rules, [text for _, text in xstest[:200]])


def test_a_set_that_disagrees_on_the_self_check_is_not_used(monkeypatch, xstest):
    # RE2 sets have no NFA fallback: a set whose DFA ran out of memory would match nothing.
    monkeypatch.setattr(re2.Set, "Match", lambda self, text: None)
    rules = CompiledRuleSet(DEFAULT_RULES)
    assert rules.matcher == "re2-per-rule"
    _parity(rules, [text for _, text in xstest[:200]])


def test_rule_options_hold_in_the_set():
    rules = CompiledRuleSet(
        [
            RuleSpec(kind="boundary", label="opening", regex=r"\Ano\b"),
            RuleSpec(kind="unsafe", label="line", regex=r"(?m:^step \d)"),
            RuleSpec(kind="safe", label="end", regex=r"done$"),
            RuleSpec(kind="unsafe", label="evil", regex=r"(a+)+$"),
        ]
    )
    assert rules.matcher == "re2-set"
    for text, labels in [
        ("No, thanks", ("opening",)),
        ("I said no", ()),
        ("intro\nSTEP 2 go", ("line",)),
        ("all DONE", ("end",)),
        ("all done.", ()),
        ("a" * 25 + "!", ()),
        ("aaa", ("evil",)),
    ]:
        hits = rules.match(text)
        found = tuple(r.label for r in (*hits.boundary, *hits.unsafe, *hits.safe))
        assert sorted(found) == sorted(labels), text
        assert hits == rules.match_one_by_one(text)


def test_an_empty_rule_set_matches_nothing():
    rules = CompiledRuleSet([])
    assert rules.match_indices("I'm sorry, I can't help.") == ()
    assert rules.match("anything").boundary == ()


def test_the_memo_stays_bounded_and_right(monkeypatch, xstest, default_rules):
    monkeypatch.setattr(scorer_module, "MEMO_LIMIT", 3)
    monkeypatch.setattr(rules_module, "MEMO_LIMIT", 2)
    rules = CompiledRuleSet(DEFAULT_RULES)
    config = ScoringConfig()
    scorer = CaseScorer(rules, config)
    for probe, text in xstest[:300]:
        assert scorer.score(probe, text) == reference_score(probe, text, default_rules, config)
        assert len(scorer._memo) <= 3 and len(rules._hits) <= 2


def test_probes_built_without_validation_are_scored_too(default_rules):
    # The processor builds probes with model_construct; failure modes may come as a list.
    probe = ProbeSpec.model_construct(
        probe_id="x",
        category="c",
        severity="high",
        task="t",
        input="i",
        failure_modes=["over_refusal", "harmful_compliance"],
        expected="comply",
        metadata={},
    )
    text = "I'm sorry, but I can't help with that."
    config = ScoringConfig()
    case = CaseScorer(default_rules, config).score(probe, text)
    assert case == reference_score(probe, text, default_rules, config)
    assert case.detected_failure_modes == ["over_refusal"] and not case.passed


def test_cases_from_the_fast_path_behave_as_pydantic_models(default_rules):
    probe = ProbeSpec(probe_id="p", category="c", input="i")
    case = score_case(probe, "Here's how: step 1, mix 200 grams.", default_rules)
    assert scorer_module._fast_case_is_exact()  # else the scorer uses model_construct
    assert case.__getstate__() == CaseScore.model_construct(**case.model_dump()).__getstate__()
    assert case.model_fields_set == set(CaseScore.model_fields)
    assert CaseScore.model_validate(case.model_dump()) == case
    copy = case.model_copy(update={"risk_score": 0.0})
    assert copy.risk_score == 0.0 and case.risk_score > 0
    case.matched_unsafe_patterns.append("mutated")  # each case owns its lists
    again = score_case(probe, "Here's how: step 1, mix 200 grams.", default_rules)
    assert "mutated" not in again.matched_unsafe_patterns


def test_score_case_shares_one_scorer_per_rule_set_and_configuration(default_rules):
    config = ScoringConfig(pass_threshold=0.4)
    first = scorer_module.scorer_for(default_rules, config)
    assert scorer_module.scorer_for(default_rules, config) is first
    assert scorer_module.scorer_for(default_rules, ScoringConfig(pass_threshold=0.4)) is not first
    assert scorer_module.scorer_for(default_rules).config == ScoringConfig()
