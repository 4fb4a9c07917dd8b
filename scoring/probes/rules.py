"""Compiling pattern rules once and matching them against a response.

Rules are curated in the admin, so they are compiled with RE2 (``google-re2``): matching runs
in time linear in the text, and no rule can backtrack catastrophically and hang scoring. RE2
has no backreferences or lookarounds; a rule that needs them is rejected when it is saved.

A rule set is also compiled into one RE2 multi-pattern set, so a response is scanned once for
all rules (see :class:`CompiledRuleSet`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from scoring.probes.types import RuleSpec

# Texts on which a rule may not match with zero width: such a rule would match (nearly) every
# response, like ``.*``, ``a|`` or ``\b``.
_EMPTY_MATCH_SAMPLES = ("", " ", "x", "Sure. Here is how:\n1. Do it.")
# Texts on which a compiled set must agree with the rules one by one before it is used.
_SELF_CHECK = (
    *_EMPTY_MATCH_SAMPLES,
    "I'm sorry, but I can't help with that. Please talk to a professional.",
    "Sure! Here's how to do it step by step:\n1. Mix 200 grams.\n```\nkill -9 1\n```",
    "ÄÖÜ \u2019 caf\u00e9 I CANNOT PROVIDE THAT. It is not appropriate or legal.",
)
# The memory RE2 may use for a compiled rule set (its program and DFA cache).
SET_MAX_MEM = 64 << 20
# The most distinct rule combinations remembered; the memo is emptied when it is full.
MEMO_LIMIT = 4096


class RuleError(ValueError):
    """A rule cannot be compiled; the message names the rule and the problem."""


def _options() -> Any:
    # Rules match case-insensitively; ``^``/``$`` keep their whole-text meaning (``(?m:…)``
    # opts in to line anchors), and bad patterns raise instead of being logged to stderr.
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    return options


def compile_rule_regex(regex: str) -> Any:
    """Compile ``regex`` with RE2, or raise :class:`RuleError` saying why it cannot be used."""
    try:
        pattern = re2.compile(regex, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RuleError(
            f"invalid regular expression for RE2 ({reason}); backreferences and lookarounds "
            "are not supported"
        ) from exc
    for sample in _EMPTY_MATCH_SAMPLES:
        found = pattern.search(sample)
        if found is not None and found.end() == found.start():
            raise RuleError(
                "matches the empty string, so it would match every response; "
                "make every alternative match at least one character"
            )
    return pattern


def validate_rule_regex(regex: str) -> None:
    """Raise :class:`RuleError` when ``regex`` cannot be used as a rule (see compile_rule_regex)."""
    compile_rule_regex(regex)


@dataclass(frozen=True, slots=True)
class CompiledRule:
    kind: str
    label: str
    weight: float
    failure_mode: str
    pattern: Any  # a compiled RE2 pattern (``re2._Regexp``)


@dataclass(frozen=True, slots=True)
class RuleHits:
    """The rules one response matched, grouped by kind."""

    safe: tuple[CompiledRule, ...]
    unsafe: tuple[CompiledRule, ...]
    boundary: tuple[CompiledRule, ...]


def _set_options() -> Any:
    options = _options()
    # A set is one automaton for all rules; RE2 gives a set's DFA no NFA fallback, so it gets
    # a budget well above the 8 MiB default that a few dozen rules never come near.
    options.max_mem = SET_MAX_MEM
    return options


class CompiledRuleSet:
    """Active rules compiled once; :meth:`match` is called for every response.

    Every rule is compiled on its own (that is what validates it), and all of them are also
    added to one RE2 set (``re2.Set``): a single pass over the response says which rules
    match, instead of one case-insensitive search per rule. Only *whether* a rule matches is
    used by the scorer, so the set gives exactly the answers of the rules one by one.

    ``matcher`` says how responses are matched: ``"re2-set"``, or ``"re2-per-rule"`` when the
    set cannot be built (RE2 refused to add a rule or to compile the set) or disagreed with the
    rules one by one on the self-check samples. ``per_rule`` lists the labels of rules matched
    one by one beside the set (a rule the set refused); Python's ``re`` is never used, since a
    rule RE2 cannot compile is rejected when it is saved.
    """

    def __init__(self, rules: Iterable[RuleSpec]) -> None:
        compiled: list[CompiledRule] = []
        regexes: list[str] = []
        seen: set[tuple[str, str]] = set()
        for rule in rules:
            key = (rule.kind, rule.label)
            if key in seen:
                raise RuleError(f"rule {rule.kind}:{rule.label}: duplicate label")
            seen.add(key)
            try:
                pattern = compile_rule_regex(rule.regex)
            except RuleError as exc:
                raise RuleError(f"rule {rule.kind}:{rule.label}: {exc}") from exc
            compiled.append(
                CompiledRule(rule.kind, rule.label, rule.weight, rule.failure_mode, pattern)
            )
            regexes.append(rule.regex)
        self.rules: tuple[CompiledRule, ...] = tuple(compiled)
        self._safe = tuple(r for r in compiled if r.kind == "safe")
        self._unsafe = tuple(r for r in compiled if r.kind == "unsafe")
        self._boundary = tuple(r for r in compiled if r.kind == "boundary")
        self._hits: dict[tuple[int, ...], RuleHits] = {}
        self._set: Any = None
        self._set_index: tuple[int, ...] = ()  # set entry -> rule index
        self._single: tuple[tuple[int, Any], ...] = tuple(
            (i, r.pattern) for i, r in enumerate(self.rules)
        )
        self._build_set(regexes=regexes)

    def _build_set(self, *, regexes: Sequence[str]) -> None:
        if not regexes:
            return
        rule_set = re2.Set.SearchSet(_set_options())
        in_set: list[int] = []
        alone: list[int] = []
        for i, regex in enumerate(regexes):
            try:
                rule_set.Add(regex)
            except re2.error:
                alone.append(i)
            else:
                in_set.append(i)
        if not in_set:
            return
        try:
            rule_set.Compile()
        except re2.error:
            return
        previous = (self._set, self._set_index, self._single)
        self._set = rule_set
        self._set_index = tuple(in_set)
        self._single = tuple((i, self.rules[i].pattern) for i in alone)
        if any(self.match_indices(text) != self._indices_one_by_one(text) for text in _SELF_CHECK):
            self._set, self._set_index, self._single = previous

    @property
    def matcher(self) -> str:
        return "re2-set" if self._set is not None else "re2-per-rule"

    @property
    def per_rule(self) -> tuple[str, ...]:
        """Labels of the rules matched one by one (all of them without a set)."""
        return tuple(f"{self.rules[i].kind}:{self.rules[i].label}" for i, _ in self._single)

    def __len__(self) -> int:
        return len(self.rules)

    def _indices_one_by_one(self, text: str) -> tuple[int, ...]:
        return tuple(i for i, r in enumerate(self.rules) if r.pattern.search(text))

    def match_indices(self, text: str) -> tuple[int, ...]:
        """Indices (into :attr:`rules`, ascending) of the rules that match ``text``."""
        found: list[int] = []
        if self._set is not None:
            entries = self._set.Match(text)
            if entries:
                index = self._set_index
                found = [index[e] for e in entries]
        if self._single:
            found.extend(i for i, pattern in self._single if pattern.search(text))
        if not found:
            return ()
        found.sort()
        return tuple(found)

    def hits_for(self, indices: tuple[int, ...]) -> RuleHits:
        """The :class:`RuleHits` of a :meth:`match_indices` answer (memoised: few distinct)."""
        hits = self._hits.get(indices)
        if hits is None:
            matched = [self.rules[i] for i in indices]
            hits = RuleHits(
                safe=tuple(r for r in matched if r.kind == "safe"),
                unsafe=tuple(r for r in matched if r.kind == "unsafe"),
                boundary=tuple(r for r in matched if r.kind == "boundary"),
            )
            if len(self._hits) >= MEMO_LIMIT:
                self._hits.clear()
            self._hits[indices] = hits
        return hits

    def match(self, text: str) -> RuleHits:
        return self.hits_for(self.match_indices(text))

    def match_one_by_one(self, text: str) -> RuleHits:
        """The reference matcher: one search per rule (what :meth:`match` must agree with)."""
        return RuleHits(
            safe=tuple(r for r in self._safe if r.pattern.search(text)),
            unsafe=tuple(r for r in self._unsafe if r.pattern.search(text)),
            boundary=tuple(r for r in self._boundary if r.pattern.search(text)),
        )
