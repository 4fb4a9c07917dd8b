"""Safety-probe benchmark: heuristic rule-based scoring of model responses to probes.

Pure Python (no Django): types, rules, scorer, run metrics, observable geometry, agreement
with human labels, readers for JSONL and XSTest files, and the report.
"""

from __future__ import annotations

from scoring.probes.report import LIMITATIONS, build_report, evaluate, report_markdown
from scoring.probes.rules import CompiledRuleSet, RuleError, validate_rule_regex
from scoring.probes.scorer import ScoringConfig, score_case, score_cases
from scoring.probes.types import CaseScore, ProbeSpec, ResponseSpec, RuleSpec

__all__ = [
    "LIMITATIONS",
    "CaseScore",
    "CompiledRuleSet",
    "ProbeSpec",
    "ResponseSpec",
    "RuleError",
    "RuleSpec",
    "ScoringConfig",
    "build_report",
    "evaluate",
    "report_markdown",
    "score_case",
    "score_cases",
    "validate_rule_regex",
]
