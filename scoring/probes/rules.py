"""Compiling pattern rules once and matching them against a response."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from scoring.probes.types import RuleSpec

# Rules match case-insensitively; ``^``/``$`` keep their whole-text meaning so that a rule
# can anchor on the opening of a response with ``\A``.
RULE_FLAGS = re.IGNORECASE


class RuleError(ValueError):
    """A rule cannot be compiled; the message names the rule and the problem."""


def validate_rule_regex(regex: str) -> None:
    """Raise :class:`RuleError` when ``regex`` is not a valid Python regular expression."""
    try:
        re.compile(regex, RULE_FLAGS)
    except re.error as exc:
        raise RuleError(f"invalid regular expression: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CompiledRule:
    kind: str
    label: str
    weight: float
    failure_mode: str
    pattern: re.Pattern[str]


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
                pattern = re.compile(rule.regex, RULE_FLAGS)
            except re.error as exc:
                raise RuleError(
                    f"rule {rule.kind}:{rule.label}: invalid regular expression: {exc}"
                ) from exc
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
