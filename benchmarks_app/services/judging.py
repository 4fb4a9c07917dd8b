"""Database side of the judge layer: the verdict cache, single flight and the call ledger.

Judges run inside an event loop (``scoring.judges.llm.structured_call`` is async), and Django's
ORM refuses to run from a thread that has a running event loop. The choice made here:

* :class:`DbJudgeCache` offers the synchronous ``get``/``put`` of the ``JudgeCache`` protocol
  for sync code, plus ``aget``/``aput`` coroutines that ``structured_call`` prefers. Those wrap
  the ORM in ``sync_to_async(thread_sensitive=True)``; drive the event loop with
  ``asgiref.sync.async_to_sync`` (not ``asyncio.run``) so that those calls execute on the
  calling thread, with its connection and its transaction.
* ``DbJudgeCache.aflight`` is single flight across processes and machines: a
  :class:`JudgeInFlight` row per question being asked; whoever finds the row waits for the
  answer in the cache instead of paying for it again (see :mod:`scoring.judges.flight`).
* :func:`ledger_recorder` returns a :class:`LedgerRecorder`, a durable recorder: each request
  is a ``pending`` :class:`JudgeCall` row before it goes out, completed after it, and a valid
  answer's completion and cache write share one transaction. A crash therefore loses no
  answered call, and leaves the calls in flight as ``pending`` rows that
  :func:`judge_calls_mark_lost` marks ``lost`` when the run is taken over. Cache hits cost
  nothing and are only buffered inside the loop: ``flush()`` (sync code, after each batch and
  at the end) writes them; called from sync code with no running loop, a record is written at
  once.
* Inside the loop, reads, claims, ledger rows and cache writes go through the loop's
  :class:`~benchmarks_app.services.judging_rounds.DbRounds`: what the calls in flight need at
  the same moment is done in one trip to the ORM thread, one query or transaction per kind,
  with the guarantees above unchanged (see that module).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import transaction

from benchmarks_app.db_pool import orm_trip
from benchmarks_app.models import EvaluationRun, JudgeCacheEntry, JudgeCall
from benchmarks_app.models.judging import JudgeCallStatus
from benchmarks_app.services.judge_records import judge_record_llm_config
from benchmarks_app.services.judging_rounds import pending_row, rounds, settled
from scoring.judges.cache import CacheWrite
from scoring.judges.llm import CallRecord, LLMConfig, fit_to_server
from scoring.judges.server import probe_server

# How often a caller waiting for another asker's answer looks at the cache again.
FLIGHT_POLL_S = 0.25


def _process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class DbJudgeCache:
    """``JudgeCache`` over :class:`JudgeCacheEntry` (only valid verdicts are ever put).

    ``holder`` names this asker on its :class:`JudgeInFlight` rows (for people reading them);
    by default the host and process.
    """

    # The ledger runs ``put`` in the transaction that completes the call's row.
    joins_ledger_transaction = True

    def __init__(self, *, holder: str = "") -> None:
        self.holder = holder
        # Questions this cache holds in flight (event loop side only), so that the ledger
        # releases a claim in the transaction that caches its answer.
        self._claims: dict[str, DbFlight] = {}

    def claim_of(self, key: str) -> DbFlight | None:
        """The claim this cache holds on ``key`` right now, if any."""
        return self._claims.get(key)

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
        _insert([CacheWrite(self, key, value, judge, model, prompt_version, vote_number)])

    def put_many(self, writes: Sequence[CacheWrite]) -> None:
        """Several fresh answers in one insert (the ledger's batched completions)."""
        if len(writes) == 1:
            writes[0]()  # through put, the one-answer write
        else:
            _insert(writes)

    async def aget(self, key: str) -> dict[str, Any] | None:
        """Read through the loop's :class:`DbRounds`: keys asked together, one query."""
        answer: dict[str, Any] | None = await rounds().submit("read", key)
        return answer

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
        write = CacheWrite(self, key, value, judge, model, prompt_version, vote_number)
        await orm_trip(self.put)(key, value, **write.labels())

    @asynccontextmanager
    async def aflight(self, key: str, *, ttl_s: float) -> AsyncIterator[DbFlight]:
        """Hold ``key``'s in-flight row while this process asks; see :mod:`scoring.judges.flight`.

        Yields at once when the row is free (or expired: its asker died, and this one takes it
        over), with the answer if one was cached meanwhile (the claim re-reads the cache).
        While another asker holds it, polls: its answer is yielded as soon as it is cached
        (ask nothing); a row that disappears without an answer (its call failed) is claimed and
        the question asked here.
        """
        holder = f"{(self.holder or _process_name())[:90]}#{uuid.uuid4().hex[:8]}"
        while True:
            mine, answer = await _claim(key, holder, ttl_s)
            if mine:
                break
            if answer is not None:
                yield DbFlight(key, holder, ttl_s, answer=answer, mine=False)
                return
            await asyncio.sleep(FLIGHT_POLL_S)
        flight = self._claims[key] = DbFlight(key, holder, ttl_s, answer=answer, mine=True)
        try:
            yield flight
        finally:
            if self._claims.get(key) is flight:
                del self._claims[key]
            if not flight.released:
                await settled(rounds().submit("release", key, holder))


def _insert(writes: Sequence[CacheWrite]) -> None:
    JudgeCacheEntry.objects.bulk_create(
        [
            JudgeCacheEntry(
                key=w.key,
                judge=w.judge[:300],
                model=w.model[:200],
                prompt_version=w.prompt_version[:50],
                vote_number=w.vote_number,
                response=w.value,
            )
            for w in writes
        ],
        # Two workers cached the same answer at once: the first one stays.
        ignore_conflicts=True,
    )


async def _claim(key: str, holder: str, ttl_s: float) -> tuple[bool, dict[str, Any] | None]:
    """Claim ``key``; a claim won by a caller cancelled meanwhile is released, not leaked."""
    task = asyncio.ensure_future(rounds().submit("claim", key, holder, ttl_s))
    try:
        got: tuple[bool, dict[str, Any] | None] = await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait([task])
        if not task.cancelled() and task.exception() is None and task.result()[0]:
            await settled(rounds().submit("release", key, holder))
        raise
    return got


class DbFlight:
    """This process's claim on a question (or the answer another asker gave meanwhile)."""

    # The claim re-read the cache: the caller need not look again.
    looked = True

    def __init__(
        self,
        key: str,
        holder: str,
        ttl_s: float,
        *,
        answer: dict[str, Any] | None = None,
        mine: bool = True,
    ) -> None:
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_s
        self.answer = answer
        self.mine = mine
        self.renewed_at = time.monotonic()
        # Its row was deleted with the answer's cache write (nothing left to release).
        self.released = False

    async def renew(self) -> None:
        """Push the claim's expiry back; a claim made or renewed moments ago is left as it is
        (the first attempt's renewal would otherwise cost a write per call)."""
        if not self.mine:
            return
        now = time.monotonic()
        if now - self.renewed_at < self.ttl_s / 4:
            return
        await rounds().submit("renew", self.key, self.holder, self.ttl_s)
        self.renewed_at = now


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class LedgerRecorder:
    """Appends :class:`JudgeCall` rows: requests as they go out, cache hits buffered.

    ``holder`` (the lease that makes the calls) is written on every row, so that the calls a
    dead holder left in flight can be marked lost (:func:`judge_calls_mark_lost`).
    """

    def __init__(self, run: EvaluationRun | None, *, holder: str = "") -> None:
        self.run_id = run.pk if run is not None else None
        self.holder = holder[:100]
        self._buffer: list[CallRecord] = []
        self._lock = threading.Lock()
        self.written = 0
        # Prompts known to be stored (their pending row committed): not sent again.
        self._prompts_stored: set[str] = set()

    def __call__(self, record: CallRecord) -> None:
        with self._lock:
            self._buffer.append(record)
        if not _in_event_loop():
            self.flush()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def _row(self, r: CallRecord) -> JudgeCall:
        return JudgeCall(
            run_id=self.run_id,
            judge=r.judge[:300],
            model=r.model[:200],
            prompt_hash=r.prompt_hash[:64],
            vote_number=r.vote_number,
            attempt=r.attempt,
            latency_ms=r.latency_ms,
            tokens_in=r.tokens_in,
            tokens_out=r.tokens_out,
            tokens_reasoning=r.tokens_reasoning,
            tokens_cached=r.tokens_cached,
            request=r.request,
            status=r.status,
            error=r.error,
            raw_response=r.raw_response,
            prompt_key=r.prompt.key if r.prompt is not None else "",
            holder=self.holder,
        )

    def flush(self) -> int:
        """Write the buffered records (sync code only); returns how many were written."""
        with self._lock:
            records, self._buffer = self._buffer, []
        if not records:
            return 0
        JudgeCall.objects.bulk_create([self._row(r) for r in records], batch_size=500)
        self.written += len(records)
        return len(records)

    async def aflush(self) -> int:
        """Flush from inside the loop (runs on the caller's thread via ``sync_to_async``)."""
        return await orm_trip(self.flush)()

    async def abegin(self, record: CallRecord) -> int:
        """The request is about to go out: a ``pending`` row (committed); returns its id.

        Rows of requests going out together are inserted together (:class:`DbRounds`), with
        their prompts where this recorder has not stored them yet.
        """
        row = pending_row(record, run_id=self.run_id, holder=self.holder)
        prompt = record.prompt
        if prompt is not None and prompt.key in self._prompts_stored:
            prompt = None
        ticket: int = await rounds().submit("begin", row, prompt)
        if prompt is not None:
            # The ticket comes back once the insert has committed: the prompt is stored.
            self._prompts_stored.add(prompt.key)
        self.written += 1
        return ticket

    async def aend(
        self, ticket: int, record: CallRecord, *, then: Callable[[], None] | None = None
    ) -> None:
        """The request ended: complete its row; ``then`` (the cache write) in one transaction.

        Completions that arrive together share that transaction (:class:`DbRounds`).
        """
        claim = None
        if isinstance(then, CacheWrite):
            claim_of = getattr(then.cache, "claim_of", None)
            claim = claim_of(then.key) if claim_of is not None else None
        release = (claim.key, claim.holder) if claim is not None else None
        released = await rounds().submit("end", ticket, record, then, release)
        if claim is not None and released:
            claim.released = True


def ledger_recorder(run: EvaluationRun | None, *, holder: str = "") -> LedgerRecorder:
    """A ``record`` callback for ``structured_call`` that ledgers calls against ``run``.

    ``holder`` names the lease making the calls (``"<piece id>:<attempt>"``).
    """
    return LedgerRecorder(run, holder=holder)


@transaction.atomic
def judge_calls_mark_lost(*, holder: str) -> int:
    """Mark the calls ``holder`` left in flight as lost (its worker died); returns how many."""
    if not holder:
        raise ValueError("holder: must name a lease (an empty one would match unowned calls)")
    return JudgeCall.objects.filter(holder=holder, status=JudgeCallStatus.PENDING).update(
        status=JudgeCallStatus.LOST, error=f"in flight when its holder {holder} was given up"
    )


@transaction.atomic
def judge_calls_interrupt(*, holder: str, reason: str) -> int:
    """Record the calls ``holder`` left in flight, or ended as abandoned on its way out, as
    interrupted by ``reason`` (a fault, not a cancel); returns how many."""
    if not holder:
        raise ValueError("holder: must name a lease (an empty one would match unowned calls)")
    return JudgeCall.objects.filter(
        holder=holder, status__in=[JudgeCallStatus.PENDING, JudgeCallStatus.ABANDONED]
    ).update(status=JudgeCallStatus.INTERRUPTED, error=f"interrupted in flight: {reason}"[:10000])


@transaction.atomic
def judge_calls_abandon(*, holder: str) -> int:
    """Mark the calls ``holder`` has in flight as abandoned (its run was cancelled)."""
    if not holder:
        raise ValueError("holder: must name a lease (an empty one would match unowned calls)")
    return JudgeCall.objects.filter(holder=holder, status=JudgeCallStatus.PENDING).update(
        status=JudgeCallStatus.ABANDONED, error="abandoned in flight: its run was cancelled"
    )


def llm_config_for_run(run: EvaluationRun, *, model: str | None = None) -> LLMConfig:
    """The LLM judge settings of ``run``: the run's own choices first, then its judge record's
    (server, model, key variable, options: the same in every worker), then the settings."""
    cfg = run.judge_config or {}
    record = run.judge_record if run.judge_record_id is not None else None
    if record is not None:
        config = judge_record_llm_config(record, model=model or cfg.get("model"))
        config.json_mode = bool(cfg.get("json_mode", config.json_mode))
        return config
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
        outage_patience_s=float(settings.JUDGE_OUTAGE_PATIENCE_S),
        stream=bool(getattr(settings, "JUDGE_STREAM", True)),
        pin_slots=bool(getattr(settings, "JUDGE_PIN_SLOTS", True)),
    )


class _RunProbe:
    """One run start's probe, shared by the pieces that start with it in this process."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.profile: Any = None


_probes: dict[tuple[Any, ...], _RunProbe] = {}
_probes_lock = threading.Lock()
# Run starts remembered (oldest forgotten first): enough for the pieces of the runs at hand.
_PROBES_KEPT = 256


def _fit(config: LLMConfig, limiter: Any) -> list[str]:
    """Size the run to what the probed server says it can do: the answer bound fits its speed
    and context (:func:`fit_to_server`), and ``limiter`` (the judge's concurrency gate) starts
    at its slot count where that is lower than JUDGE_CONCURRENCY. Returns what changed."""
    notes = fit_to_server(config)
    slots = config.profile.slots
    if slots and limiter is not None and slots < limiter.max_width:
        notes.append(
            f"concurrency {slots} (the server's slots) instead of JUDGE_CONCURRENCY="
            f"{limiter.max_width}: more requests would only queue on the server"
        )
        limiter.max_width = limiter.width = slots
    return notes


async def llm_config_probe(
    run: EvaluationRun, *, client: Any, config: LLMConfig, limiter: Any = None
) -> LLMConfig:
    """Probe the server once per run start (``JUDGE_PROBE``), size the run to what it says
    it can do (:func:`_fit`) and record on the run how it is asked.

    The pieces of a run that a process drives side by side share one probe: the first asks,
    the others wait for its profile and size themselves the same way (a resumed run,
    ``attempts`` + 1, probes again). Runs inside the run's event loop; the record is written
    through ``sync_to_async`` so it lands on the processor's thread and connection.
    """
    key = (run.pk, run.attempts, config.model, config.base_url, config.json_mode)
    with _probes_lock:
        entry = _probes.get(key)
        mine = entry is None
        if entry is None:
            entry = _probes[key] = _RunProbe()
            while len(_probes) > _PROBES_KEPT:
                del _probes[next(iter(_probes))]
    if not mine:
        while not entry.done.is_set():
            await asyncio.sleep(0.02)
        if entry.profile is not None:
            config.profile = entry.profile
            _fit(config, limiter)
        return config
    try:
        if settings.JUDGE_PROBE and not config.json_mode:
            config.profile = await probe_server(
                client,
                model=config.model,
                temperature=config.temperature,
                timeout_s=min(config.timeout_s, 60.0),
                base_url=config.base_url,
                stream=config.stream,
            )
            if notes := _fit(config, limiter):
                config.profile = replace(config.profile, notes=(*config.profile.notes, *notes))
            entry.profile = config.profile
    finally:
        entry.done.set()
    await orm_trip(_record_request)(run.pk, config.sampling_record())
    return config


def _record_request(run_id: int, record: dict[str, Any]) -> None:
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        run.judge_config = {**(run.judge_config or {}), "request": record}
        run.save(update_fields=["judge_config", "updated_at"])
