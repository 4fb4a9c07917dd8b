"""Plain data types of the audit benchmark (no storage concerns)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

HIGH, MEDIUM, LOW, INFO, BEST_PRACTICES = "High", "Medium", "Low", "Info", "Best Practices"
SEVERITIES = (HIGH, MEDIUM, LOW, INFO, BEST_PRACTICES)
QA_SEVERITIES = frozenset({INFO, BEST_PRACTICES})
# Keys of the severity counts in reports.
SEVERITY_KEYS = {
    HIGH: "high",
    MEDIUM: "medium",
    LOW: "low",
    INFO: "info",
    BEST_PRACTICES: "bestpractices",
}

MATCH, PARTIAL, NONE, JUDGE_FAILED = "match", "partial", "none", "judge_failed"


@dataclass(frozen=True)
class TruthItem:
    """A verified finding. ``key`` identifies it to the caller (database id, finding id)."""

    key: Any
    finding_id: str
    title: str
    description: str = ""
    severity: str = ""
    contracts: tuple[str, ...] = ()

    @classmethod
    def of(cls, finding: Any, *, key: Any) -> TruthItem:
        """From anything with a truth finding's attributes (a parsed record, a model row)."""
        return cls(
            key=key,
            finding_id=finding.finding_id,
            title=finding.title,
            description=finding.description,
            severity=finding.severity,
            contracts=tuple(finding.contracts or ()),
        )


@dataclass(frozen=True)
class ScanItem:
    """A scanner finding; ``index`` is its position in the scanner's file (from 0)."""

    index: int
    title: str
    description: str = ""
    severity: str = ""
    vulnerability_type: str = ""
    file: str = ""
    location: str = ""

    @property
    def is_qa(self) -> bool:
        return self.severity in QA_SEVERITIES

    @classmethod
    def of(cls, finding: Any) -> ScanItem:
        """From anything with a scan finding's attributes (a parsed record, a model row)."""
        return cls(
            index=finding.index,
            title=finding.title,
            description=finding.description,
            severity=finding.severity,
            vulnerability_type=finding.vulnerability_type,
            file=finding.file,
            location=finding.location,
        )


class AuditVerdict(BaseModel):
    """One judge answer for one truth finding against one batch of scan findings.

    ``index_of_finding_from_junior_auditor`` is the scan finding's index as shown in the
    prompt (its position in the scanner's file), or -1 when nothing matches.
    """

    is_match: bool = Field(description="The scan finding describes the same issue.")
    is_partial_match: bool = Field(
        description="Right contract, function and core issue, but incomplete."
    )
    # Bounds on the text where the server compiles the schema into a grammar (llama.cpp, see
    # scoring.judges.wire): a small model otherwise fills a field until the token bound cuts
    # the answer. A severity is a word; the prompt asks one to three sentences of explanation.
    explanation: str = Field(json_schema_extra={"x-max-chars": 400})
    severity_from_junior_auditor: str = Field(json_schema_extra={"x-max-chars": 24})
    severity_from_truth: str = Field(json_schema_extra={"x-max-chars": 24})
    index_of_finding_from_junior_auditor: int

    @property
    def label(self) -> str:
        if self.is_match:
            return MATCH
        if self.is_partial_match:
            return PARTIAL
        return NONE


def neither(
    explanation: str = "No finding in this batch matches.", truth_severity: str = ""
) -> AuditVerdict:
    return AuditVerdict(
        is_match=False,
        is_partial_match=False,
        explanation=explanation,
        severity_from_junior_auditor="N/A",
        severity_from_truth=truth_severity or "N/A",
        index_of_finding_from_junior_auditor=-1,
    )


@dataclass
class VoteLog:
    """One vote as stored with the result (``label`` None: the vote failed)."""

    batch: int
    number: int
    label: str | None
    index: int | None
    explanation: str = ""
    error: str = ""
    # The scan indices of the batch the vote was asked about, so a maintainer reviewing the
    # verdict sees what the judge saw (empty where not known: votes decided again from a bundle).
    seen: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "batch": self.batch,
            "vote": self.number,
            "verdict": self.label or "failed",
            "index": self.index,
            "explanation": self.explanation,
            "error": self.error,
        }
        if self.seen:
            out["seen"] = list(self.seen)
        return out


@dataclass
class TruthOutcome:
    """The consensus for one truth finding."""

    truth_key: Any
    outcome: str  # MATCH | PARTIAL | NONE | JUDGE_FAILED
    finding_id: str = ""
    scan_index: int | None = None
    explanation: str = ""
    votes: list[VoteLog] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.outcome == JUDGE_FAILED

    @property
    def label(self) -> str:
        return self.finding_id or str(self.truth_key)


@functools.lru_cache(maxsize=1024)
def batch_verdict_schema(
    indices: tuple[int, ...], *, claims_name_a_finding: bool = False
) -> type[AuditVerdict]:
    """:class:`AuditVerdict` whose ``index_of_finding_from_junior_auditor`` may only be one of
    ``indices`` (the batch's scan findings) or -1: sent as the answer's JSON schema, a server
    that enforces it (llama.cpp's grammar, vLLM's guided decoding) cannot answer an index
    outside the batch. The answer is still an :class:`AuditVerdict`.

    ``claims_name_a_finding`` (for llama.cpp's grammar only: OpenAI's strict mode takes no
    ``anyOf`` at the root) sends two shapes instead of one: a claim (match or partial) naming
    one of ``indices``, or neither with -1. A 135M model on llama.cpp otherwise claimed a
    match with -1 (the answer :func:`scoring.audit.matching.invalid_reason` refuses) in 6 of
    14 answers, and a truth finding refused twice stops its repo."""
    allowed = tuple(sorted({-1, *indices}))
    extra = _claims_name_a_finding(indices) if claims_name_a_finding else None
    return create_model(
        "AuditVerdict",
        __base__=AuditVerdict,
        __config__=None if extra is None else ConfigDict(json_schema_extra=extra),
        index_of_finding_from_junior_auditor=(Literal[allowed], ...),  # type: ignore[arg-type]
    )


def _claims_name_a_finding(indices: tuple[int, ...]) -> Callable[[dict[str, Any]], None]:
    def shapes(schema: dict[str, Any]) -> None:
        def shape(**fixed: dict[str, Any]) -> dict[str, Any]:
            return {**schema, "properties": {**schema["properties"], **fixed}}

        claim = shape(index_of_finding_from_junior_auditor={"enum": sorted(set(indices))})
        neither = shape(
            is_match={"const": False},
            is_partial_match={"const": False},
            index_of_finding_from_junior_auditor={"const": -1},
        )
        schema.clear()
        schema["anyOf"] = [claim, neither] if indices else [neither]

    return shapes
