"""The ``openai`` audit judge: an LLM, on OpenAI or an OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from scoring.audit.judges.prompts import PROMPT_VERSION, SYSTEM_PROMPT, build_user_prompt
from scoring.audit.matching import invalid_reason
from scoring.audit.types import AuditVerdict, ScanItem, TruthItem
from scoring.judges.llm import JudgeCache, LLMConfig, Recorder, make_client, structured_call


class OpenAIAuditJudge:
    """The LLM judge, for OpenAI and OpenAI-compatible servers (``base_url``)."""

    name = "openai"

    def __init__(
        self,
        *,
        config: LLMConfig,
        client: Any = None,
        cache: JudgeCache | None = None,
        record: Recorder | None = None,
        concurrency: int = 4,
        http_client: Any = None,
    ) -> None:
        self.config = config
        self.model = config.model
        self.client = client or make_client(config, http_client=http_client)
        self.cache = cache
        self.record = record
        self._concurrency = concurrency
        self._semaphore: asyncio.Semaphore | None = None

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._concurrency)
        async with self._semaphore:
            return await structured_call(
                self.client,
                config=self.config,
                judge_name=self.name,
                prompt_version=PROMPT_VERSION,
                system=SYSTEM_PROMPT,
                user=build_user_prompt(truth, batch),
                schema=AuditVerdict,
                vote_number=vote_number,
                cache=self.cache,
                record=self.record,
                validate=lambda v: invalid_reason(v, batch),
            )

    async def aclose(self) -> None:
        await self.client.close()
