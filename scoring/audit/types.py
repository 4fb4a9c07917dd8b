"""Plain data types of the audit benchmark (no storage concerns)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

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
    explanation: str
    severity_from_junior_auditor: str
    severity_from_truth: str
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "vote": self.number,
            "verdict": self.label or "failed",
            "index": self.index,
            "explanation": self.explanation,
            "error": self.error,
        }


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
def batch_verdict_schema(indices: tuple[int, ...]) -> type[AuditVerdict]:
    """:class:`AuditVerdict` whose ``index_of_finding_from_junior_auditor`` may only be one of
    ``indices`` (the batch's scan findings) or -1: sent as the answer's JSON schema, a server
    that enforces it (llama.cpp's grammar, vLLM's guided decoding) cannot answer an index
    outside the batch. The answer is still an :class:`AuditVerdict`."""
    allowed = tuple(sorted({-1, *indices}))
    return create_model(
        "AuditVerdict",
        __base__=AuditVerdict,
        index_of_finding_from_junior_auditor=(Literal[allowed], ...),  # type: ignore[arg-type]
    )
