"""The ``openai`` audit judge: an LLM, on OpenAI or an OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.audit.judges.prompts import PROMPT_VERSION, prompt_for, shown_span
from scoring.audit.matching import invalid_reason
from scoring.audit.types import AuditVerdict, ScanItem, TruthItem, batch_verdict_schema
from scoring.judges.consensus import VoteFailed
from scoring.judges.limits import gate_for
from scoring.judges.llm import (
    ContextOverflow,
    JudgeCache,
    LLMConfig,
    Recorder,
    make_client,
    structured_call,
)
from scoring.judges.server import JSON_SCHEMA


def _rank(verdict: AuditVerdict) -> int:
    return 2 if verdict.is_match else 1 if verdict.is_partial_match else 0


def best_of(verdicts: Sequence[AuditVerdict]) -> AuditVerdict:
    """The verdict over a whole batch from verdicts over its parts, in batch order.

    The question is "does any finding of this batch describe the truth finding, and which is
    best?": a match beats a partial match beats neither, and the earlier part wins a tie, as a
    judge reading the list in order would choose.
    """
    return max(verdicts, key=_rank)  # max keeps the first of equal ranks


class OpenAIAuditJudge:
    """The LLM judge, for OpenAI and OpenAI-compatible servers (``base_url``).

    A batch whose prompt does not fit the server's context is split in two and each half asked
    the same question (recursively, down to one scan finding); a single finding that still
    does not fit fails the vote with the setting to change. Calls go through the process's
    :class:`~scoring.judges.limits.CallGate` for the endpoint (``concurrency``, ``rpm``,
    ``tpm``).

    With prompt version 3, a repo's scan findings given to :meth:`register` are listed around
    each batch (:func:`~scoring.audit.judges.prompts.shown_span`), so that the prompts of a
    repo keep their prefix when matches take findings out of the pool; a batch whose prompt
    with its span does not fit the context is asked again with the batch alone first.
    """

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
        rpm: int = 0,
        tpm: int = 0,
        prompt_version: str = PROMPT_VERSION,
    ) -> None:
        self.config = config
        # Version 1 is kept for caches recorded with it; version 2 shares its prefixes.
        self.prompt = prompt_for(prompt_version)
        self.model = config.model
        self.client = client or make_client(config, http_client=http_client)
        self.cache = cache
        self.record = record
        # One gate per endpoint and model for the whole process: every run and repo a worker
        # judges shares its width and rate limit.
        self.limiter = gate_for(config.base_url, config.model, width=concurrency, rpm=rpm, tpm=tpm)
        self.splits = 0
        # Truth key -> its repo's scan findings in the scanner's order, and index -> place.
        self._listings: dict[Any, tuple[list[ScanItem], dict[int, int]]] = {}

    def register(
        self, repo: str, truths: Sequence[TruthItem], scans: Sequence[ScanItem] = ()
    ) -> None:
        """The scan findings of ``repo``, in the scanner's order, for its truth findings'
        prompts (see :func:`~scoring.audit.judges.prompts.shown_span`)."""
        listing = list(scans)
        position = {s.index: place for place, s in enumerate(listing)}
        for truth in truths:
            self._listings[truth.key] = (listing, position)

    def shown(self, truth: TruthItem, batch: Sequence[ScanItem]) -> list[ScanItem]:
        """The findings the prompt for ``batch`` lists: its span of the repo's findings
        (a registered repo, prompt version 3, a server that enforces the answer's schema),
        else the batch alone.

        Only where the server enforces the schema, whose index is one of the batch's: there a
        model cannot name a finding it was shown but may not choose (matched already). A
        server that takes only ``json_object`` leaves that to the model, and a small one then
        names a taken finding it sees, an invalid answer twice over."""
        listing = self._listings.get(truth.key)
        if (
            listing is None
            or self.prompt.version != PROMPT_VERSION
            or self.config.response_format != JSON_SCHEMA
        ):
            return list(batch)
        return shown_span(listing[0], listing[1], batch)

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        return await self._judge(truth, batch, vote_number, self.shown(truth, batch))

    async def _judge(
        self,
        truth: TruthItem,
        batch: Sequence[ScanItem],
        vote_number: int,
        shown: Sequence[ScanItem],
    ) -> AuditVerdict:
        try:
            return await self._ask(truth, batch, vote_number, shown)
        except ContextOverflow as first_overflow:
            overflow = first_overflow
        if len(shown) > len(batch):
            # The findings listed around the batch made it too long: the batch alone.
            try:
                return await self._ask(truth, batch, vote_number, list(batch))
            except ContextOverflow as alone_overflow:
                overflow = alone_overflow
        if len(batch) <= 1:
            # The advice (which setting to change) is added where causes are summarized.
            raise VoteFailed(
                f"{overflow.reason}; even one scan finding does not fit the server's context"
            ) from overflow
        self.splits += 1
        middle = len(batch) // 2
        # The halves alone: a span around them would make them longer again.
        first = await self._judge(truth, batch[:middle], vote_number, batch[:middle])
        second = await self._judge(truth, batch[middle:], vote_number, batch[middle:])
        return best_of([first, second])

    async def _ask(
        self,
        truth: TruthItem,
        batch: Sequence[ScanItem],
        vote_number: int,
        shown: Sequence[ScanItem],
    ) -> AuditVerdict:
        return await structured_call(
            self.client,
            config=self.config,
            judge_name=self.name,
            prompt_version=self.prompt.version,
            system=self.prompt.system,
            user=self.prompt.build(truth, batch, shown),
            schema=self._schema(batch),
            vote_number=vote_number,
            cache=self.cache,
            record=self.record,
            validate=lambda v: invalid_reason(v, batch),
            limiter=self.limiter,
        )

    def _schema(self, batch: Sequence[ScanItem]) -> type[AuditVerdict]:
        # Where the server enforces the schema, it also keeps the chosen index to the batch's
        # findings (or -1): a small model then cannot name a finding that is not there.
        if self.config.response_format != JSON_SCHEMA:
            return AuditVerdict
        return batch_verdict_schema(
            tuple(s.index for s in batch), claims_name_a_finding=self.config.grammar
        )

    async def aclose(self) -> None:
        await self.client.close()
