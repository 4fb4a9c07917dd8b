"""Processing a probe run: scoring each response, then writing the run's report.

This is the processor that the queue task (:mod:`benchmarks_app.tasks.probes`) calls. It
scores with the judge configuration frozen on the run (:func:`.rules.judge_config`), falling
back to the current rules and settings only for runs created without one. Whether a response
refuses is decided by the run's refusal signal (:mod:`.refusal`): the rules (inside the
scorer), the classifier (one vectorised pass per chunk) or the LLM judge (every call cached and
ledgered; a response it could not label is left unscored, the run fails naming why, and a
resume asks again only for those).

Responses are read, scored and stored a page of ``CHUNK`` at a time (the LLM judge reads them
all, as it labels them in one event loop), and the report reads the stored cases back in pages
into a metrics tally, so memory grows with the cases the geometry needs and no more.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from benchmarks_app.db_pool import orm_trip
from benchmarks_app.models import (
    EvaluationRun,
    Probe,
    ProbeCaseResult,
    ProbeRunReport,
    Response,
)
from benchmarks_app.services.judging import (
    DbJudgeCache,
    LedgerRecorder,
    ledger_recorder,
    llm_config_for_run,
    llm_config_probe,
)
from benchmarks_app.services.leases import until_cancelled
from benchmarks_app.services.probes.refusal import classifier_for_run
from benchmarks_app.services.probes.rules import (
    active_rule_specs,
    geometry_min_cases,
    scoring_config,
)
from benchmarks_app.services.run_state import run_advance, run_finish, run_set_total
from scoring.judges.failures import summarize_items
from scoring.judges.llm import make_client
from scoring.judges.server import AdaptiveLimiter
from scoring.probes.agreement import refusal_agreement
from scoring.probes.geometry import observable_geometry
from scoring.probes.metrics import resilience_interval, suite_version
from scoring.probes.refusal import RefusalVerdict, rules_verdict
from scoring.probes.refusal_judge import OpenAIRefusalJudge, judge_verdict
from scoring.probes.report import refusal_summary
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import CaseScorer, ScoringConfig
from scoring.probes.tally import MetricsTally
from scoring.probes.types import CaseScore, ProbeSpec, RuleSpec

# Responses scored and stored per transaction: the most a crashed run has to redo.
CHUNK = 2000
# Responses labelled by the LLM judge between two stores (progress and ledger are written then).
JUDGE_CHUNK = 100


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


class _Specs(dict[int, ProbeSpec]):
    """Probe specs by probe pk, built once per probe for the whole run."""

    def of(self, response: Response) -> ProbeSpec:
        spec = self.get(response.probe_id)
        if spec is None:
            spec = self[response.probe_id] = _probe_spec(response.probe)
        return spec


def _store_chunk(
    run: EvaluationRun,
    chunk: Sequence[Response],
    verdicts: Sequence[RefusalVerdict | None],
    scorer: CaseScorer,
    specs: _Specs,
    recorder: LedgerRecorder | None = None,
) -> None:
    """Score ``chunk`` (``None`` verdict: the rules decide) and store it in one transaction."""
    rows = []
    cases = scorer.score_many(((specs.of(r), r.output) for r in chunk), verdicts)
    for response, verdict, case in zip(chunk, verdicts, cases, strict=True):
        stored = verdict or rules_verdict(case.boundary_or_refusal_signal)
        rows.append(
            ProbeCaseResult(
                run=run,
                response=response,
                probe_id=response.probe_id,
                passed=case.passed,
                risk_score=case.risk_score,
                weighted_risk=case.weighted_risk,
                boundary_or_refusal_signal=case.boundary_or_refusal_signal,
                case={**case.model_dump(), **stored.case_fields()},
            )
        )
    with transaction.atomic():
        ProbeCaseResult.objects.bulk_create(rows, batch_size=1000)
    if rows:
        run_advance(run=run, by=len(rows))
    if recorder is not None:
        recorder.flush()


async def _judge_all(
    run: EvaluationRun,
    todo: list[Response],
    scorer: CaseScorer,
    refusal: dict[str, Any],
) -> tuple[int, list[list[str]]]:
    """Label every response with the LLM judge in ONE event loop; store chunk by chunk.

    The client is created here and closed here: its pooled connections belong to this loop.
    Returns how many responses could not be labelled, with their votes' failure reasons.
    """
    config = llm_config_for_run(run, model=str(refusal.get("model") or "") or None)
    recorder = ledger_recorder(run)
    judge = OpenAIRefusalJudge(
        client=make_client(config),
        config=config,
        cache=DbJudgeCache(),
        record=recorder,
        limiter=AdaptiveLimiter(int(settings.JUDGE_CONCURRENCY)),
        iterations=int(refusal.get("iterations") or 1),
    )
    failed: list[list[str]] = []
    specs = _Specs()
    try:
        await llm_config_probe(run, client=judge.client, config=judge.config)
        for start in range(0, len(todo), JUDGE_CHUNK):
            chunk = todo[start : start + JUDGE_CHUNK]
            results = await until_cancelled(
                judge.judge_many(
                    [(r.probe.input, r.output) for r in chunk],
                    concurrency=int(settings.JUDGE_CONCURRENCY),
                ),
                run_id=run.pk,
            )
            verdicts = [judge_verdict(result, judge.source) for result in results]
            failed += [
                [v.error for v in result.votes if v.error] or [result.reason]
                for result, verdict in zip(results, verdicts, strict=True)
                if verdict is None
            ]
            judged = [(r, v) for r, v in zip(chunk, verdicts, strict=True) if v is not None]
            await orm_trip(_store_chunk)(
                run, [r for r, _ in judged], [v for _, v in judged], scorer, specs, recorder
            )
    finally:
        await judge.aclose()
        await recorder.aflush()
    return len(failed), failed


def _signal_source(run: EvaluationRun, refusal: dict[str, Any]) -> tuple[str, str]:
    signal = str(refusal.get("signal") or "rules")
    if signal == "classifier":
        frozen = refusal.get("classifier") or {}
        sha = str(frozen.get("sha256") or "")
        return signal, f"classifier {frozen.get('name')} (sha256 {sha[:12]})"
    if signal == "openai":
        return signal, run.judge
    return "rules", "rules"


def _suite_version(
    suite_id: int, rules: Sequence[RuleSpec], scoring: ScoringConfig, signal: str, source: str
) -> str:
    """The version of the suite this run was scored against (see ``suite_version``).

    Probes are read now, at scoring time: rows scored before a curator edits a probe keep the
    old version and are never ranked with rows scored after.
    """
    probes = [_probe_spec(p) for p in Probe.objects.filter(suite_id=suite_id).order_by("id")]
    return suite_version(
        probes,
        rules,
        scoring=scoring.as_dict(),
        refusal={"signal": signal, "source": source},
    )


def _pages(responses: QuerySet[Response], done: set[int]) -> Iterator[list[Response]]:
    """The responses not in ``done``, in id order, read ``CHUNK`` at a time."""
    last = 0
    while page := list(responses.filter(pk__gt=last).select_related("probe")[:CHUNK]):
        last = page[-1].pk
        todo = [r for r in page if r.pk not in done]
        if todo:
            yield todo


def _write_report(
    run: EvaluationRun,
    submission_id: int,
    config: dict[str, Any],
    signal: str,
    source: str,
    version: str,
) -> None:
    labels = dict(
        Response.objects.filter(submission_id=submission_id)
        .exclude(human_label="")
        .values_list("pk", "human_label")
    )
    stored = (
        ProbeCaseResult.objects.filter(run=run)
        .order_by("response_id")
        .values_list("response_id", "case")
        .iterator(chunk_size=CHUNK)
    )
    fields = CaseScore.model_fields
    tally = MetricsTally()
    cases: list[CaseScore] = []
    labelled: list[tuple[str, bool, str]] = []
    for rid, row in stored:
        case = CaseScore.model_construct(**{k: v for k, v in row.items() if k in fields})
        tally.add(case)
        cases.append(case)
        labelled.append((case.category, case.boundary_or_refusal_signal, labels.get(rid, "")))
    metrics = {
        **tally.result(),
        "refusal_signal": refusal_summary(signal, source),
        "suite_version": version,
    }
    agreement = refusal_agreement(labelled, signal=source)
    observability = observable_geometry(
        cases, min_cases=int(config.get("geometry_min_cases", geometry_min_cases()))
    )
    overall = metrics["overall"]
    ProbeRunReport.objects.create(
        run=run,
        submission_id=submission_id,
        metrics=metrics,
        observability=observability,
        agreement=agreement,
        resilience_index=metrics["indices"]["resilience_index"],
        pass_rate=overall["pass_rate"],
        severity_weighted_pass_rate=overall["severity_weighted_pass_rate"],
        high_stakes_failure_rate=overall["high_stakes_failure_rate"],
        # Computed once here, not per request: boards only read it.
        ci=resilience_interval(cases),
    )


def probe_run_process(run: EvaluationRun) -> None:
    """Score every response of the run's submission not scored yet, then write the report.

    Case rows are bulk-inserted chunk by chunk, each chunk in its own transaction, so a
    crashed run resumes where it stopped.
    """
    submission = run.probe_submission
    if submission is None:
        raise ValueError(f"run #{run.pk} has no probe submission")
    config = run.judge_config or {}
    rule_specs = [RuleSpec(**r) for r in config.get("rules") or []] or active_rule_specs()
    scoring = (
        ScoringConfig.from_dict(config.get("scoring"))
        if config.get("scoring")
        else scoring_config()
    )
    # One scorer for the run: all rules in one RE2 set, per-combination results memoised.
    scorer = CaseScorer(CompiledRuleSet(rule_specs), scoring)
    refusal: dict[str, Any] = config.get("refusal") or {"signal": "rules"}
    signal, source = _signal_source(run, refusal)
    responses = Response.objects.filter(submission_id=submission.pk).order_by("id")
    done = set(ProbeCaseResult.objects.filter(run=run).values_list("response_id", flat=True))
    run_set_total(run=run, total=responses.count(), done=len(done))

    if signal == "openai":
        todo = [r for r in responses.select_related("probe") if r.pk not in done]
        # Loaded here: the judge is built inside the event loop, where the ORM may not run.
        _ = run.judge_record
        failed, reasons = async_to_sync(_judge_all)(run, todo, scorer, refusal) if todo else (0, [])
        if failed:
            run_finish(run=run, failed_items=failed, failure_causes=summarize_items(reasons))
            return
    else:
        detector = classifier_for_run(submission.suite, refusal) if signal == "classifier" else None
        specs = _Specs()
        for chunk in _pages(responses, done):
            verdicts: list[RefusalVerdict | None] = (
                list(detector.detect([r.output for r in chunk]))
                if detector is not None
                else [None] * len(chunk)
            )
            _store_chunk(run, chunk, verdicts, scorer, specs)

    if not ProbeRunReport.objects.filter(run=run).exists():
        version = _suite_version(submission.suite_id, rule_specs, scoring, signal, source)
        _write_report(run, submission.pk, config, signal, source, version)
    run_finish(run=run)
