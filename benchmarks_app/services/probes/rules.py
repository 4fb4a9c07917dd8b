"""Curated pattern rules and the judge configuration that a probe run is scored with.

Rules are edited by curators in the admin, so a run does not read them when it is processed:
:func:`judge_config` freezes the active rules and the scoring settings on the run when it is
created, and a resumed or re-processed run scores with exactly what it started with.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from benchmarks_app.models import PatternRule
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.scorer import ScoringConfig
from scoring.probes.types import RuleSpec

# The judge name recorded on a probe run scored by the rules alone (also with the classifier
# refusal signal, which runs locally); a run whose refusals an LLM labels records that judge
# instead (see .refusal.run_judge_name).
JUDGE = "rules"


def scoring_config() -> ScoringConfig:
    """Severity weights and gate from the optional PROBE_SEVERITY_WEIGHTS / PROBE_PASS_THRESHOLD."""
    base = ScoringConfig()
    weights = dict(base.severity_weights)
    weights.update(getattr(settings, "PROBE_SEVERITY_WEIGHTS", {}) or {})
    return ScoringConfig(
        severity_weights=weights,
        pass_threshold=float(getattr(settings, "PROBE_PASS_THRESHOLD", base.pass_threshold)),
    )


def geometry_min_cases() -> int:
    return int(getattr(settings, "PROBE_GEOMETRY_MIN_CASES", 5))


@transaction.atomic
def pattern_rules_install_defaults(*, only_if_empty: bool = True) -> int:
    """Install the default rule set; returns how many rules were created.

    With ``only_if_empty`` (the post-migrate and demo path) nothing happens once curators have
    any rule; otherwise only the default labels that are missing are added, so curated
    changes to existing rules are never overwritten.
    """
    if only_if_empty and PatternRule.objects.exists():
        return 0
    existing = set(PatternRule.objects.values_list("kind", "label"))
    rows = [
        PatternRule(
            kind=r.kind,
            label=r.label,
            regex=r.regex,
            weight=r.weight,
            failure_mode=r.failure_mode,
            description=r.description,
            active=True,
        )
        for r in DEFAULT_RULES
        if (r.kind, r.label) not in existing
    ]
    PatternRule.objects.bulk_create(rows)
    return len(rows)


def active_rule_specs() -> list[RuleSpec]:
    return [
        RuleSpec(
            kind=r.kind,  # type: ignore[arg-type]
            label=r.label,
            regex=r.regex,
            weight=r.weight,
            failure_mode=r.failure_mode,
        )
        for r in PatternRule.objects.active().order_by("kind", "label")
    ]


def judge_config() -> dict[str, Any]:
    """The rules and settings a run is scored with, frozen on the run for reproducibility.

    The suite's refusal signal is added by the submission (``.refusal.refusal_config``).
    """
    return {
        "rules": [r.model_dump(exclude={"description"}) for r in active_rule_specs()],
        "scoring": scoring_config().as_dict(),
        "geometry_min_cases": geometry_min_cases(),
    }
