"""Writes of the safety-probe benchmark: rules, suites, submissions and scoring runs."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    PatternRule,
    Probe,
    ProbeCaseResult,
    ProbeRunReport,
    ProbeSuite,
    Response,
    ResponseSubmission,
)
from benchmarks_app.services.runs import run_advance, run_create, run_finish, run_set_total
from benchmarks_app.services.uploads import upload_too_large
from scoring.probes.agreement import refusal_agreement
from scoring.probes.default_rules import DEFAULT_RULES
from scoring.probes.geometry import observable_geometry
from scoring.probes.io import (
    ProbeFormatError,
    check_responses,
    detect_format,
    parse_probes,
    parse_responses,
)
from scoring.probes.metrics import run_metrics
from scoring.probes.rules import CompiledRuleSet
from scoring.probes.scorer import ScoringConfig, score_case
from scoring.probes.types import CaseScore, ProbeSpec, ResponseSpec, RuleSpec

JUDGE = "rules"
CHUNK = 2000

__all__ = [
    "JUDGE",
    "ProbeFormatError",
    "ProbeOwnershipError",
    "SuiteImport",
    "pattern_rules_install_defaults",
    "probe_run_process",
    "probe_submission_rescore",
    "probe_submission_submit",
    "probe_submission_upload",
    "probe_suite_import",
]


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


# --- Rules ---------------------------------------------------------------------------------


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


# --- Suites --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteImport:
    suite: ProbeSuite
    created: int
    updated: int


@transaction.atomic
def probe_suite_import(
    *,
    name: str,
    text: str,
    fmt: str,
    source_name: str = "",
    description: str = "",
) -> SuiteImport:
    """Create or extend a suite from a JSONL or XSTest file; all or nothing.

    Probes already in the suite are updated in place (their scored cases keep the snapshot of
    the task and input they were scored with).
    """
    name = name.strip()
    if not name:
        raise ProbeFormatError(source_name or "suite", ["field 'suite': a suite name is required"])
    specs = parse_probes(text, fmt, source_name or f"{fmt} file")
    suite, _ = ProbeSuite.objects.get_or_create(
        name=name, defaults={"description": description, "source": source_name[:300]}
    )
    existing = {p.probe_id: p for p in suite.probes.all()}
    new: list[Probe] = []
    changed: list[Probe] = []
    fields = ["category", "severity", "task", "input", "failure_modes", "expected", "metadata"]
    for spec in specs:
        values = {
            "category": spec.category,
            "severity": spec.severity,
            "task": spec.task,
            "input": spec.input,
            "failure_modes": list(spec.failure_modes),
            "expected": spec.expected,
            "metadata": dict(spec.metadata),
        }
        probe = existing.get(spec.probe_id)
        if probe is None:
            new.append(Probe(suite=suite, probe_id=spec.probe_id, **values))
        elif any(getattr(probe, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(probe, k, v)
            changed.append(probe)
    Probe.objects.bulk_create(new, batch_size=1000)
    if changed:
        Probe.objects.bulk_update(changed, fields, batch_size=500)
    return SuiteImport(suite=suite, created=len(new), updated=len(changed))


# --- Submissions ---------------------------------------------------------------------------


class ProbeOwnershipError(ProbeFormatError, PermissionError):
    """The model name on this suite is not the submitter's to write; nothing was stored.

    A :class:`ProbeFormatError` whose one error starts with ``field 'model':`` (so callers
    that list a submission's problems by field show it on the model field), and a
    :class:`PermissionError` like the audit service's scanner check: ``field`` and
    ``message`` give the parts and ``str()`` is ``"model: <message>"``, so an API maps it
    to a 403 naming the field.
    """

    field = "model"

    def __init__(self, source: str, message: str) -> None:
        self.message = message
        super().__init__(source, [f"field 'model': {message}"])

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


# Unicode control, format (zero-width), private-use and surrogate characters.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})


def _model_name_refusal(*, suite: ProbeSuite, model_name: str, owner: Any) -> str | None:
    """Why ``owner`` may not submit under ``model_name`` on ``suite``; None when it may.

    The leaderboard keeps one row per (suite, model name), the latest scored submission, so
    writing under a name replaces that row. As with audit scanners, a name belongs to whoever
    first submitted it on the suite; a name whose first submission has no owner was imported
    by the maintainers (``submit_responses``, the demo). Only its owner and staff may submit
    under a name; ``owner=None`` is the maintainers' own path (management commands).
    """
    if owner is None:
        return None
    if not getattr(owner, "is_authenticated", False):
        return "sign in to submit responses"
    if getattr(owner, "is_staff", False):
        return None
    # Case-insensitive: "GPT-4" next to the curators' "gpt-4" would pass for their row.
    first = (
        ResponseSubmission.objects.filter(suite=suite, model_name__iexact=model_name)
        .order_by("pk")
        .values("owner_id")
        .first()
    )
    if first is None or first["owner_id"] == owner.pk:
        return None
    whose = (
        "is maintained by the site's curators"
        if first["owner_id"] is None
        else "belongs to another user"
    )
    return (
        f"model {model_name!r} on suite {suite.name!r} {whose}; "
        "submit under a model name of your own"
    )


def _judge_config() -> dict[str, Any]:
    """The rules and settings a run is scored with, frozen on the run for reproducibility."""
    return {
        "rules": [r.model_dump(exclude={"description"}) for r in active_rule_specs()],
        "scoring": scoring_config().as_dict(),
        "geometry_min_cases": geometry_min_cases(),
    }


@transaction.atomic
def probe_submission_submit(
    *,
    suite_name: str,
    model_name: str,
    responses: Sequence[ResponseSpec] | None = None,
    text: str | None = None,
    fmt: str = "jsonl",
    source_name: str = "",
    owner: Any = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """Store one model's responses to a suite and queue their scoring; all or nothing.

    Either ``responses`` or ``text`` (a JSONL or XSTest completions file) is given. Unknown
    probe ids, duplicates, empty outputs and probes left unanswered are all reported by id.

    ``owner`` is the submitting user (None for the management command). A model name on a
    suite belongs to its first submitter; anybody else but staff gets a
    :class:`ProbeOwnershipError` (see :func:`_model_name_refusal`).
    """
    source = source_name or f"{fmt} responses"
    suite = ProbeSuite.objects.filter(name=suite_name).first()
    if suite is None:
        raise ProbeFormatError(source, [f"field 'suite': no probe suite named {suite_name!r}"])
    model_name = unicodedata.normalize("NFKC", model_name).strip()[:200]
    # Every dash (non-breaking hyphen, en dash...) is stored as "-", as it reads.
    model_name = "".join("-" if unicodedata.category(ch) == "Pd" else ch for ch in model_name)
    if not model_name:
        raise ProbeFormatError(source, ["field 'model': a model name is required"])
    if any(unicodedata.category(ch) in INVISIBLE_CATEGORIES for ch in model_name):
        # Zero-width or control characters make a name that looks like another model's.
        raise ProbeFormatError(
            source, ["field 'model': the name contains invisible or control characters"]
        )
    # Checked first, unlocked, so that nobody parses a large file only to be refused...
    refusal = _model_name_refusal(suite=suite, model_name=model_name, owner=owner)
    if refusal:
        raise ProbeOwnershipError(source, refusal)
    if responses is None:
        responses = parse_responses(text or "", fmt, source)
    probes = {p.probe_id: p for p in suite.probes.all()}
    if not probes:
        raise ProbeFormatError(source, [f"suite {suite_name!r} has no probes; import them first"])
    check_responses(list(responses), probes.keys(), source)
    config = _judge_config()
    if not config["rules"]:
        pattern_rules_install_defaults()
        config = _judge_config()
    # ...and again under a lock on the suite, held until commit: of two users claiming a new
    # name at once, the second waits here and then sees the first one's submission. (SQLite
    # has no row locks, but its IMMEDIATE transactions already serialize writers.)
    ProbeSuite.objects.select_for_update().get(pk=suite.pk)
    refusal = _model_name_refusal(suite=suite, model_name=model_name, owner=owner)
    if refusal:
        raise ProbeOwnershipError(source, refusal)
    submission = ResponseSubmission.objects.create(
        suite=suite,
        model_name=model_name,
        owner=owner if getattr(owner, "is_authenticated", False) else None,
        source_name=source_name[:300],
    )
    Response.objects.bulk_create(
        [
            Response(
                submission=submission,
                probe=probes[r.probe_id],
                output=r.output,
                human_label=r.human_label,
            )
            for r in responses
        ],
        batch_size=1000,
    )
    return run_create(
        benchmark=Benchmark.PROBES,
        judge=JUDGE,
        judge_config=config,
        created_by=owner,
        enqueue=enqueue,
        probe_submission=submission,
    )


@transaction.atomic
def probe_submission_upload(
    *,
    suite_name: str,
    model_name: str,
    upload: UploadedFile,
    fmt: str | None = None,
    owner: Any = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """``probe_submission_submit`` for an uploaded file, as the web form sends it.

    Applies the API's upload checks first (size before reading, UTF-8) with the API's
    messages; ``fmt`` empty means detect it from the file name, as the API does.
    """
    name = upload.name or "upload"
    too_large = upload_too_large(upload.size, name)
    if too_large:
        raise ProbeFormatError(name, [too_large])
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProbeFormatError(name, [f"{name}: not UTF-8 text"]) from exc
    return probe_submission_submit(
        suite_name=suite_name,
        model_name=model_name,
        text=text,
        fmt=fmt or detect_format(name, text),
        source_name=name,
        owner=owner,
        enqueue=enqueue,
    )


@transaction.atomic
def probe_submission_rescore(
    *, submission: ResponseSubmission, created_by: Any = None
) -> EvaluationRun:
    """Queue a new run of a submission with the rules as they are now (results are appended)."""
    return run_create(
        benchmark=Benchmark.PROBES,
        judge=JUDGE,
        judge_config=_judge_config(),
        created_by=created_by,
        probe_submission=submission,
    )


# --- Scoring (called by the task) ----------------------------------------------------------


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
