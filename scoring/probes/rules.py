"""Compiling pattern rules once and matching them against a response.

Rules are curated in the admin, so they are compiled with RE2 (``google-re2``): matching runs
in time linear in the text, and no rule can backtrack catastrophically and hang scoring. RE2
has no backreferences or lookarounds; a rule that needs them is rejected when it is saved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from scoring.probes.types import RuleSpec

# Texts on which a rule may not match with zero width: such a rule would match (nearly) every
# response, like ``.*``, ``a|`` or ``\b``.
_EMPTY_MATCH_SAMPLES = ("", " ", "x", "Sure. Here is how:\n1. Do it.")


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


class CompiledRuleSet:
    """Active rules compiled once; :meth:`match` is called for every response."""

    def __init__(self, rules: Iterable[RuleSpec]) -> None:
        compiled: list[CompiledRule] = []
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
        self.rules: tuple[CompiledRule, ...] = tuple(compiled)
        self._safe = tuple(r for r in compiled if r.kind == "safe")
        self._unsafe = tuple(r for r in compiled if r.kind == "unsafe")
        self._boundary = tuple(r for r in compiled if r.kind == "boundary")

    def __len__(self) -> int:
        return len(self.rules)

    def match(self, text: str) -> RuleHits:
        return RuleHits(
            safe=tuple(r for r in self._safe if r.pattern.search(text)),
            unsafe=tuple(r for r in self._unsafe if r.pattern.search(text)),
            boundary=tuple(r for r in self._boundary if r.pattern.search(text)),
        )
