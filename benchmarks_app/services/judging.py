"""Database side of the judge layer: the verdict cache and the call ledger.

Judges run inside an event loop (``scoring.judges.llm.structured_call`` is async), and Django's
ORM refuses to run from a thread that has a running event loop. The choice made here:

* :class:`DbJudgeCache` offers the synchronous ``get``/``put`` of the ``JudgeCache`` protocol
  for sync code, plus ``aget``/``aput`` coroutines that ``structured_call`` prefers. Those wrap
  the ORM in ``sync_to_async(thread_sensitive=True)``; drive the event loop with
  ``asgiref.sync.async_to_sync`` (not ``asyncio.run``) so that those calls execute on the
  calling thread, with its connection and its transaction.
* :func:`ledger_recorder` returns a :class:`LedgerRecorder`: calling it from inside the loop
  only buffers the record (no I/O on the loop); ``flush()`` bulk-inserts the buffer and must be
  called from sync code (after each batch, and at the end). Called from sync code with no
  running loop, a record is written at once.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction

from benchmarks_app.models import EvaluationRun, JudgeCacheEntry, JudgeCall
from scoring.judges.llm import CallRecord, LLMConfig
from scoring.judges.server import probe_server


class DbJudgeCache:
    """``JudgeCache`` over :class:`JudgeCacheEntry` (only valid verdicts are ever put)."""

    def get(self, key: str) -> dict[str, Any] | None:
        entry = JudgeCacheEntry.objects.filter(key=key).values_list("response", flat=True).first()
        return entry if isinstance(entry, dict) else None

    def put(
        self,
        key: str,
        value: dict[str, Any],
        *,
        judge: str,
        model: str,
        prompt_version: str,
        vote_number: int,
    ) -> None:
        try:
            with transaction.atomic():
                JudgeCacheEntry.objects.get_or_create(
                    key=key,
                    defaults={
                        "judge": judge[:300],
                        "model": model[:200],
                        "prompt_version": prompt_version[:50],
                        "vote_number": vote_number,
                        "response": value,
                    },
                )
        except IntegrityError:
            # Two workers cached the same answer at once: the first one stays.
            pass

    async def aget(self, key: str) -> dict[str, Any] | None:
        return await sync_to_async(self.get, thread_sensitive=True)(key)

    async def aput(
        self,
        key: str,
        value: dict[str, Any],
        *,
        judge: str,
        model: str,
        prompt_version: str,
        vote_number: int,
    ) -> None:
        await sync_to_async(self.put, thread_sensitive=True)(
            key,
            value,
            judge=judge,
            model=model,
            prompt_version=prompt_version,
            vote_number=vote_number,
        )


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class LedgerRecorder:
    """Collects :class:`CallRecord` s and appends them as :class:`JudgeCall` rows."""

    def __init__(self, run: EvaluationRun | None) -> None:
        self.run_id = run.pk if run is not None else None
        self._buffer: list[CallRecord] = []
        self._lock = threading.Lock()
        self.written = 0

    def __call__(self, record: CallRecord) -> None:
        with self._lock:
            self._buffer.append(record)
        if not _in_event_loop():
            self.flush()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def flush(self) -> int:
        """Write the buffered records (sync code only); returns how many were written."""
        with self._lock:
            records, self._buffer = self._buffer, []
        if not records:
            return 0
        JudgeCall.objects.bulk_create(
            [
                JudgeCall(
                    run_id=self.run_id,
                    judge=r.judge[:300],
                    model=r.model[:200],
                    prompt_hash=r.prompt_hash[:64],
                    vote_number=r.vote_number,
                    attempt=r.attempt,
                    latency_ms=r.latency_ms,
                    tokens_in=r.tokens_in,
                    tokens_out=r.tokens_out,
                    status=r.status,
                    error=r.error,
                )
                for r in records
            ],
            batch_size=500,
        )
        self.written += len(records)
        return len(records)

    async def aflush(self) -> int:
        """Flush from inside the loop (runs on the caller's thread via ``sync_to_async``)."""
        return await sync_to_async(self.flush, thread_sensitive=True)()


def ledger_recorder(run: EvaluationRun | None) -> LedgerRecorder:
    """A ``record`` callback for ``structured_call`` that ledgers calls against ``run``."""
    return LedgerRecorder(run)


def llm_config_for_run(run: EvaluationRun, *, model: str | None = None) -> LLMConfig:
    """The LLM judge settings of ``run``: the run's own choices first, then the settings."""
    cfg = run.judge_config or {}
    return LLMConfig(
        model=str(model or cfg.get("model") or settings.JUDGE_MODEL),
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL,
        timeout_s=float(settings.JUDGE_TIMEOUT_S),
        max_retries=int(settings.JUDGE_MAX_RETRIES),
        json_mode=bool(cfg.get("json_mode", settings.JUDGE_JSON_MODE)),
        backoff_base_s=float(settings.JUDGE_BACKOFF_BASE_S),
        backoff_max_s=float(settings.JUDGE_BACKOFF_MAX_S),
        max_answer_tokens=int(settings.JUDGE_MAX_ANSWER_TOKENS),
        temperature=settings.JUDGE_TEMPERATURE,
        seed=settings.JUDGE_SEED,
    )


async def llm_config_probe(run: EvaluationRun, *, client: Any, config: LLMConfig) -> LLMConfig:
    """Probe the server once (``JUDGE_PROBE``) and record on the run how it is asked.

    Runs inside the run's event loop; the record is written through ``sync_to_async`` so it
    lands on the processor's thread and connection.
    """
    if settings.JUDGE_PROBE and not config.json_mode:
        config.profile = await probe_server(
            client,
            model=config.model,
            temperature=config.temperature,
            timeout_s=min(config.timeout_s, 60.0),
        )
    await sync_to_async(_record_request, thread_sensitive=True)(run.pk, config.sampling_record())
    return config


def _record_request(run_id: int, record: dict[str, Any]) -> None:
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        run.judge_config = {**(run.judge_config or {}), "request": record}
        run.save(update_fields=["judge_config", "updated_at"])
