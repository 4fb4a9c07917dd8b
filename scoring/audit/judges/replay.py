"""The ``replay:DIR`` audit judge: verdicts read back from a reference pipeline's results."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scoring.audit.judges.prompts import PROMPT_V2, build_user_prompt_v2
from scoring.audit.matching import invalid_reason
from scoring.audit.types import AuditVerdict, ScanItem, TruthItem, neither
from scoring.judges import failures
from scoring.judges.consensus import VoteFailed
from scoring.judges.llm import JudgeCache, Recorder, local_call


def _replay(reason: str) -> str:
    # Tagged so that the run's error gives the replay advice, not "resume once it is fixed".
    return failures.tag(failures.REPLAY, f"replay: {reason}")


class ReplayAuditJudge:
    """Answers from a reference pipeline's judged results: ``DIR/<repo>_results.json``.

    The non-FP rows of a file are the repo's truth findings in order; a batch gets the recorded
    verdict when the recorded scan finding is in it, and "neither" otherwise (so a recorded
    match at index -1 never counts).
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        cache: JudgeCache | None = None,
        record: Recorder | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.name = f"replay:{folder}"
        self.model = "replay"
        self.cache = cache
        self.record = record
        self._rows: dict[str, list[dict[str, Any]]] = {}
        # truth key → (repo, position), registered by the caller before matching.
        self._positions: dict[Any, tuple[str, int]] = {}

    @staticmethod
    def recorded_repos(folder: str | Path) -> set[str]:
        """Project ids that ``folder`` holds recorded results for."""
        return {p.name.removesuffix("_results.json") for p in Path(folder).glob("*_results.json")}

    def rows(self, repo: str) -> list[dict[str, Any]]:
        if repo not in self._rows:
            path = self.folder / f"{repo}_results.json"
            if not path.is_file():
                raise VoteFailed(_replay(f"no recorded results {path}"))
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise VoteFailed(_replay(f"cannot read {path}: {exc}")) from exc
            if not isinstance(data, list):
                raise VoteFailed(_replay(f"{path} is not a list of results"))
            self._rows[repo] = [r for r in data if isinstance(r, dict) and not r.get("is_fp")]
        return self._rows[repo]

    def register(
        self, repo: str, truths: Sequence[TruthItem], scans: Sequence[ScanItem] = ()
    ) -> None:
        for position, truth in enumerate(truths):
            self._positions[truth.key] = (repo, position)

    def decide(self, truth: TruthItem, batch: Sequence[ScanItem]) -> AuditVerdict:
        if truth.key not in self._positions:
            raise VoteFailed(_replay(f"truth {truth.finding_id} was not registered"))
        repo, position = self._positions[truth.key]
        rows = self.rows(repo)
        if position >= len(rows):
            raise VoteFailed(
                _replay(f"{repo} has {len(rows)} recorded truth results, none for #{position}")
            )
        row = rows[position]
        index = int(row.get("index_of_finding_from_junior_auditor", -1))
        claimed = bool(row.get("is_match") or row.get("is_partial_match"))
        if not claimed or index not in {s.index for s in batch}:
            return neither("Replay: the recorded finding is not in this batch.", truth.severity)
        return AuditVerdict(
            is_match=bool(row.get("is_match")),
            is_partial_match=bool(row.get("is_partial_match")) and not row.get("is_match"),
            explanation=str(row.get("explanation", "")),
            severity_from_junior_auditor=str(row.get("severity_from_junior_auditor", "")),
            severity_from_truth=str(row.get("severity_from_truth", truth.severity)),
            index_of_finding_from_junior_auditor=index,
        )

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        position = self._positions.get(truth.key, ("", -1))
        return await local_call(
            judge_name=self.name,
            model=self.model,
            prompt_version=PROMPT_V2,
            prompt_text=f"{position}\n{build_user_prompt_v2(truth, batch)}",
            vote_number=vote_number,
            compute=lambda: self.decide(truth, batch),
            schema=AuditVerdict,
            cache=self.cache,
            record=self.record,
            validate=lambda v: invalid_reason(v, batch),
        )
