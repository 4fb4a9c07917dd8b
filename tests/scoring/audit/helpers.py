"""A scripted audit judge for tests: verdicts chosen per truth finding, batch and vote."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scoring.audit.matching import invalid_reason
from scoring.audit.types import AuditVerdict, ScanItem, TruthItem, neither
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import CallRecord, local_call

# A script answers (truth key, batch indices, vote number) with a label and a scan index, or
# raises VoteFailed. Labels: "match", "partial", "none".
Script = Callable[[Any, tuple[int, ...], int], "tuple[str, int] | str"]


def verdict(label: str, index: int = -1) -> AuditVerdict:
    if label == "none":
        return neither()
    return AuditVerdict(
        is_match=label == "match",
        is_partial_match=label == "partial",
        explanation=f"scripted {label}",
        severity_from_junior_auditor="High",
        severity_from_truth="High",
        index_of_finding_from_junior_auditor=index,
    )


class ScriptedJudge:
    name = "scripted"
    model = "script"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.asked: list[tuple[Any, tuple[int, ...], int]] = []
        self.records: list[CallRecord] = []

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        indices = tuple(s.index for s in batch)

        def compute() -> AuditVerdict:
            self.asked.append((truth.key, indices, vote_number))
            answer = self.script(truth.key, indices, vote_number)
            if isinstance(answer, str):
                return verdict(answer)
            return verdict(*answer)

        return await local_call(
            judge_name=self.name,
            model=self.model,
            prompt_version="t",
            prompt_text=f"{truth.key}{indices}",
            vote_number=vote_number,
            compute=compute,
            schema=AuditVerdict,
            record=self.records.append,
            validate=lambda v: invalid_reason(v, batch),
        )


def truths(n: int) -> list[TruthItem]:
    return [TruthItem(key=f"T{i}", finding_id=f"T{i}", title=f"truth {i}") for i in range(n)]


def scans(n: int, qa: Sequence[int] = ()) -> list[ScanItem]:
    return [
        ScanItem(index=i, title=f"scan {i}", severity="Info" if i in qa else "High")
        for i in range(n)
    ]


def fail(reason: str = "boom") -> None:
    raise VoteFailed(reason)
