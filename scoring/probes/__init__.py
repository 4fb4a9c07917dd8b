"""Safety-probe benchmark: heuristic rule-based scoring of model responses to probes.

Pure Python (no Django): types, rules, scorer, run metrics, observable geometry, agreement
with human labels, readers for JSONL and XSTest files, the report, and the pluggable refusal
signal (rules, a trained classifier kept as JSON, or an LLM judge; see ``refusal``).
"""

from __future__ import annotations

from scoring.probes.refusal import REFUSAL_SIGNALS, ClassifierRefusal, RefusalVerdict
from scoring.probes.refusal_classifier import RefusalClassifier, train_refusal_classifier
from scoring.probes.report import LIMITATIONS, build_report, evaluate, report_markdown
from scoring.probes.rules import CompiledRuleSet, RuleError, validate_rule_regex
from scoring.probes.scorer import ScoringConfig, score_case, score_cases
from scoring.probes.types import CaseScore, ProbeSpec, ResponseSpec, RuleSpec

__all__ = [
    "LIMITATIONS",
    "REFUSAL_SIGNALS",
    "CaseScore",
    "ClassifierRefusal",
    "CompiledRuleSet",
    "ProbeSpec",
    "RefusalClassifier",
    "RefusalVerdict",
    "ResponseSpec",
    "RuleError",
    "RuleSpec",
    "ScoringConfig",
    "build_report",
    "evaluate",
    "report_markdown",
    "score_case",
    "score_cases",
    "train_refusal_classifier",
    "validate_rule_regex",
]
