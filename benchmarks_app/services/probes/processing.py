"""Processing a probe run: scoring each response by the rules, then writing the run's report.

This is the processor that the queue task (:mod:`benchmarks_app.tasks.probes`) calls. It
scores with the judge configuration frozen on the run (:func:`.rules.judge_config`), falling
back to the current rules and settings only for runs created without one.
"""

from __future__ import annotations

from django.db import transaction

from benchmarks_app.models import (
    EvaluationRun,
    Probe,
    ProbeCaseResult,
    ProbeRunReport,
    Response,
)
from benchmarks_app.services.probes.rules import (
    active_rule_specs,
    geometry_min_cases,
    scoring_config,
)
from benchmarks_app.services.runs import run_advance, run_finish, run_set_total
from scoring.probes.agreement import refusal_agreement
from scoring.probes.geometry import observable_geometry
from scoring.probes.metrics import run_metrics
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import ScoringConfig, score_case
from scoring.probes.types import CaseScore, ProbeSpec, RuleSpec

# Responses scored and stored per transaction: the most a crashed run has to redo.
CHUNK = 2000


def _probe_spec(probe: Probe) -> ProbeSpec:
    return ProbeSpec.model_construct(
        probe_id=probe.probe_id,
        category=probe.category,
        severity=probe.severity,
        task=probe.task,
        input=probe.input,
        failure_modes=tuple(probe.failure_modes or ()),
        expected=probe.expected,
        metadata={},
    )


def probe_run_process(run: EvaluationRun) -> None:
    """Score every response of the run's submission not scored yet, then write the report.

    Case rows are bulk-inserted chunk by chunk, each chunk in its own transaction, so a
    crashed run resumes where it stopped.
    """
    if run.probe_submission_id is None:
        raise ValueError(f"run #{run.pk} has no probe submission")
    config = run.judge_config or {}
    rule_specs = [RuleSpec(**r) for r in config.get("rules") or []] or active_rule_specs()
    rules = CompiledRuleSet(rule_specs)
    scoring = (
        ScoringConfig.from_dict(config.get("scoring"))
        if config.get("scoring")
        else scoring_config()
    )
    responses = list(
        Response.objects.filter(submission_id=run.probe_submission_id)
        .select_related("probe")
        .order_by("id")
    )
    done = set(ProbeCaseResult.objects.filter(run=run).values_list("response_id", flat=True))
    run_set_total(run=run, total=len(responses), done=len(done))
    todo = [r for r in responses if r.pk not in done]
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        rows = []
        for response in chunk:
            case = score_case(_probe_spec(response.probe), response.output, rules, scoring)
            rows.append(
                ProbeCaseResult(
                    run=run,
                    response=response,
                    probe_id=response.probe_id,
                    passed=case.passed,
                    risk_score=case.risk_score,
                    weighted_risk=case.weighted_risk,
                    boundary_or_refusal_signal=case.boundary_or_refusal_signal,
                    case=case.model_dump(),
                )
            )
        with transaction.atomic():
            ProbeCaseResult.objects.bulk_create(rows, batch_size=1000)
        run_advance(run=run, by=len(chunk))

    if not ProbeRunReport.objects.filter(run=run).exists():
        labels = {r.pk: r.human_label for r in responses}
        stored = list(
            ProbeCaseResult.objects.filter(run=run)
            .order_by("response_id")
            .values_list("response_id", "case")
        )
        cases = [CaseScore.model_construct(**case) for _, case in stored]
        metrics = run_metrics(cases)
        agreement = refusal_agreement(
            (c.category, c.boundary_or_refusal_signal, labels.get(rid, ""))
            for (rid, _), c in zip(stored, cases, strict=True)
        )
        observability = observable_geometry(
            cases, min_cases=int(config.get("geometry_min_cases", geometry_min_cases()))
        )
        overall = metrics["overall"]
        ProbeRunReport.objects.create(
            run=run,
            submission_id=run.probe_submission_id,
            metrics=metrics,
            observability=observability,
            agreement=agreement,
            resilience_index=metrics["indices"]["resilience_index"],
            pass_rate=overall["pass_rate"],
            severity_weighted_pass_rate=overall["severity_weighted_pass_rate"],
            high_stakes_failure_rate=overall["high_stakes_failure_rate"],
        )
    run_finish(run=run)
