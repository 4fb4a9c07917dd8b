"""Safety-probe benchmark: heuristic rule-based scoring of model responses to probes.

Pure Python (no Django): types, rules, scorer, run metrics, observable geometry, agreement
with human labels, readers for JSONL and XSTest files, the report, and the pluggable refusal
signal (rules, a trained classifier kept as JSON, or an LLM judge; see ``refusal``).

The names below are loaded on first use (PEP 562), not when the package is imported: every
Django process imports a submodule of this package, and importing them all eagerly would load
scikit-learn and scipy (seconds) into processes that never build a report or train anything.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the submodule that defines it.
_EXPORTS = {
    "LIMITATIONS": "report",
    "REFUSAL_SIGNALS": "refusal",
    "CaseScore": "types",
    "CaseScorer": "scorer",
    "ClassifierRefusal": "refusal",
    "CompiledRuleSet": "rules",
    "MetricsTally": "tally",
    "ProbeSpec": "types",
    "RefusalClassifier": "refusal_classifier",
    "RefusalVerdict": "refusal",
    "ResponseSpec": "types",
    "RuleError": "rules",
    "RuleSpec": "types",
    "ScoringConfig": "scorer",
    "build_report": "report",
    "evaluate": "report",
    "report_markdown": "report",
    "score_case": "scorer",
    "score_cases": "scorer",
    "train_refusal_classifier": "refusal_classifier",
    "validate_rule_regex": "rules",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
