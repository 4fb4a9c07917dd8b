"""Choosing an audit judge: the ``--judge`` spec (``offline``, ``openai``, ``replay:DIR``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scoring.audit.judges.llm import OpenAIAuditJudge
from scoring.audit.judges.offline import OfflineAuditJudge
from scoring.audit.judges.replay import ReplayAuditJudge
from scoring.audit.matching import AuditJudge
from scoring.judges.llm import JudgeCache, LLMConfig, Recorder


@dataclass(frozen=True)
class JudgeSpec:
    kind: str  # "offline" | "openai" | "replay"
    argument: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.argument}" if self.argument else self.kind


def parse_judge_spec(text: str) -> JudgeSpec:
    text = (text or "").strip()
    kind, _, argument = text.partition(":")
    if kind in ("offline", "openai") and not argument:
        return JudgeSpec(kind)
    if kind == "replay" and argument:
        return JudgeSpec(kind, argument)
    raise ValueError(f"judge: {text!r} is not one of offline, openai, replay:DIR")


def make_judge(
    spec: JudgeSpec,
    *,
    llm: LLMConfig | None = None,
    cache: JudgeCache | None = None,
    record: Recorder | None = None,
    concurrency: int = 4,
    http_client: Any = None,
    rpm: int = 0,
    tpm: int = 0,
) -> AuditJudge:
    if spec.kind == "offline":
        return OfflineAuditJudge(cache=cache, record=record)
    if spec.kind == "replay":
        return ReplayAuditJudge(spec.argument, cache=cache, record=record)
    if llm is None:
        raise ValueError("judge openai needs an LLMConfig")
    return OpenAIAuditJudge(
        config=llm,
        cache=cache,
        record=record,
        concurrency=concurrency,
        http_client=http_client,
        rpm=rpm,
        tpm=tpm,
    )
