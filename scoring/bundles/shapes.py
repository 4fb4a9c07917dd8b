"""What each member must hold for the checks to read it, per benchmark and manifest version: a
member that is not what its version promises is a :class:`BundleError` naming it (exit 2),
never a TypeError deep in a check."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scoring.bundles.layout import (
    INPUTS,
    MAX_RESAMPLES,
    METRICS,
    REPO_ID_PATTERN,
    RUN,
    VERDICTS,
    Bundle,
    BundleError,
)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _RunShape(_Loose):
    status: str = ""


class _AuditTruthShape(_Loose):
    key: int | str
    finding_id: str | None = ""
    severity: str = ""


class _AuditScanShape(_Loose):
    index: int
    severity: str = ""


class _AuditRepoShape(_Loose):
    project_id: str = Field(pattern=REPO_ID_PATTERN)
    truth: list[_AuditTruthShape]
    scan: list[_AuditScanShape]


class _AuditInputsShape(_Loose):
    repos: list[_AuditRepoShape]


class _AuditVoteShape(_Loose):
    batch: int
    vote: int
    verdict: str | None = None
    index: int | None = None


class _AuditRowShape(_Loose):
    repo: str
    truth_key: int | str
    outcome: str
    scan_index: int | None = None
    votes: list[_AuditVoteShape] | None = None


class _AuditVerdictsShape(_Loose):
    truth_results: list[_AuditRowShape]


class _AuditStoredRepoShape(_Loose):
    metrics: dict[str, Any]
    false_positive_indices: list[int] | None = None


class _IntervalShape(_Loose):
    low: float
    high: float
    level: float = Field(gt=0, lt=1)
    resamples: int = Field(ge=1, le=MAX_RESAMPLES)
    seed: int


class _AuditMetricsShape(_Loose):
    repos: dict[str, _AuditStoredRepoShape]
    overall: dict[str, Any] | None


class _AuditMetricsShapeV2(_AuditMetricsShape):
    interval: _IntervalShape | None


class _ProbeResponseShape(_Loose):
    response_id: int | str
    human_label: str | None = ""


class _ProbeInputsShape(_Loose):
    responses: list[_ProbeResponseShape]


class _ProbeCaseShape(_Loose):
    response_id: int | str
    probe_id: str
    passed: bool
    weighted_risk: float
    case: dict[str, Any]


class _ProbeVerdictsShape(_Loose):
    cases: list[_ProbeCaseShape]


class _ProbeMetricsShape(_Loose):
    metrics: dict[str, Any] | None
    ci: Any
    agreement: dict[str, Any] | None


class _ChecklistVoteShape(_Loose):
    number: int
    correct: bool | None = None


class _AssessmentShape(_Loose):
    paper_kind: str
    question: int
    answer: str
    status: str
    correct: int | None
    votes: list[_ChecklistVoteShape] | None = None


class _ChecklistVerdictsShape(_Loose):
    assessments: list[_AssessmentShape]


class _ChecklistMetricsShape(_Loose):
    scores: dict[str, Any] | None
    ci: Any


SHAPES: dict[str, dict[int, dict[str, type[BaseModel]]]] = {
    "audit": {
        1: {
            RUN: _RunShape,
            INPUTS: _AuditInputsShape,
            VERDICTS: _AuditVerdictsShape,
            METRICS: _AuditMetricsShape,
        },
        2: {
            RUN: _RunShape,
            INPUTS: _AuditInputsShape,
            VERDICTS: _AuditVerdictsShape,
            METRICS: _AuditMetricsShapeV2,
        },
    },
    "probes": {
        v: {
            RUN: _RunShape,
            INPUTS: _ProbeInputsShape,
            VERDICTS: _ProbeVerdictsShape,
            METRICS: _ProbeMetricsShape,
        }
        for v in (1, 2)
    },
    "checklist": {
        v: {RUN: _RunShape, VERDICTS: _ChecklistVerdictsShape, METRICS: _ChecklistMetricsShape}
        for v in (1, 2)
    },
}


def check_shapes(bundle: Bundle) -> None:
    """Raise :class:`BundleError` naming the first member (and field) that is not what the
    manifest's benchmark and version promise."""
    manifest = bundle.manifest
    for name, shape in SHAPES[manifest.benchmark][manifest.version].items():
        value = bundle.get(name)
        if manifest.version >= 2 and name == METRICS and value == {}:
            raise BundleError(f"{METRICS}: empty; version 2 writes every metrics key")
        try:
            shape.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top)"
            raise BundleError(f"{name}: {where}: {first['msg']}") from None
