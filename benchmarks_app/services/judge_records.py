"""Judge records: the default ones made from today's settings, adding, resolving, checking.

``--judge NAME`` names a record first; the older spellings (``offline``, ``openai``,
``openai:MODEL``, ``replay:DIR``) keep working: ``offline`` and ``openai`` are the names of the
default records, ``openai:MODEL`` is the default ``openai`` record asked with that model, and a
replay folder needs no record.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from benchmarks_app.models import JudgeKind, JudgeRecord
from benchmarks_app.models.judge_records import JUDGE_NAME_RE
from scoring.bundles import BundleError, audit_replay_files, read_bundle_file, verify
from scoring.judges.llm import LLMConfig, make_client
from scoring.judges.server import probe_server

# The records that stand for the judges of today's spellings; their blank options follow the
# site's settings, so runs made with them behave as before records existed.
DEFAULT_RECORDS = (("offline", JudgeKind.OFFLINE), ("openai", JudgeKind.OPENAI))


class JudgeRecordError(ValueError):
    """A judge record that cannot be made or found; the message is ``"field: problem"``."""


class JudgeBundleError(JudgeRecordError):
    """A bundle that cannot be read (malformed, hostile): commands exit 2 on it, as
    ``verify_run`` and ``python -m scoring.bundles`` do."""


def _inside(folder: Path, name: str) -> Path:
    """``folder/name``, refused unless it stays inside ``folder`` (the repo ids are checked by
    the reader already; this holds whatever a later format lets through)."""
    base = folder.resolve()
    path = (base / name).resolve()
    if path.parent != base:
        raise JudgeBundleError(f"bundle: {name!r} would be written outside {base}")
    return path


def judge_records_ensure_defaults() -> None:
    """Create the default records where missing (never changes a curated one)."""
    for name, kind in DEFAULT_RECORDS:
        JudgeRecord.objects.get_or_create(name=name, defaults={"kind": kind})


@transaction.atomic
def judge_record_create(
    *,
    name: str,
    kind: str = JudgeKind.OPENAI,
    base_url: str = "",
    model: str = "",
    api_key_env: str = "OPENAI_API_KEY",
    max_answer_tokens: int | None = None,
    temperature: float | None = None,
    concurrency: int | None = None,
    timeout_s: float | None = None,
    replace: bool = False,
) -> JudgeRecord:
    """Add (or, with ``replace``, update) a judge record, checked field by field."""
    record = JudgeRecord.objects.filter(name=name).first() if replace else None
    record = record or JudgeRecord(name=name)
    record.kind = kind
    record.base_url = base_url
    record.model = model
    record.api_key_env = api_key_env
    record.max_answer_tokens = max_answer_tokens
    record.temperature = temperature
    record.concurrency = concurrency
    record.timeout_s = timeout_s
    try:
        record.full_clean()
    except ValidationError as exc:
        field, problems = next(iter(exc.message_dict.items()))
        raise JudgeRecordError(f"{field}: {problems[0]}") from None
    record.save()
    return record


def judge_record_find(text: str) -> JudgeRecord | None:
    """The record ``--judge`` names, or the default record of a legacy spelling of it."""
    text = (text or "").strip()
    found = JudgeRecord.objects.filter(name=text).first()
    if found is not None:
        return found
    kind = text.partition(":")[0]
    if kind == JudgeKind.OPENAI:
        return JudgeRecord.objects.filter(name="openai").first()
    return None


def judge_api_key(record: JudgeRecord) -> str:
    """The API key from the variable the record names, in this process's environment."""
    name = record.api_key_env or "OPENAI_API_KEY"
    return os.environ.get(name, "") or str(getattr(settings, "OPENAI_API_KEY", "") or "")


def judge_record_llm_config(record: JudgeRecord, *, model: str | None = None) -> LLMConfig:
    """How an LLM judge of ``record`` is asked; blank options follow the site's settings."""
    answer_bound = record.max_answer_tokens or settings.JUDGE_MAX_ANSWER_TOKENS
    return LLMConfig(
        model=str(model or record.model or settings.JUDGE_MODEL),
        api_key=judge_api_key(record),
        base_url=record.base_url or settings.OPENAI_BASE_URL,
        timeout_s=float(record.timeout_s or settings.JUDGE_TIMEOUT_S),
        max_retries=int(settings.JUDGE_MAX_RETRIES),
        json_mode=bool(settings.JUDGE_JSON_MODE),
        backoff_base_s=float(settings.JUDGE_BACKOFF_BASE_S),
        backoff_max_s=float(settings.JUDGE_BACKOFF_MAX_S),
        max_answer_tokens=int(answer_bound),
        temperature=(
            record.temperature if record.temperature is not None else settings.JUDGE_TEMPERATURE
        ),
        seed=settings.JUDGE_SEED,
        outage_patience_s=float(settings.JUDGE_OUTAGE_PATIENCE_S),
        stream=bool(getattr(settings, "JUDGE_STREAM", True)),
        pin_slots=bool(getattr(settings, "JUDGE_PIN_SLOTS", True)),
    )


def judge_record_concurrency(record: JudgeRecord | None) -> int:
    """Calls in flight per worker for runs of ``record``."""
    if record is not None and record.concurrency:
        return int(record.concurrency)
    return int(getattr(settings, "JUDGE_CONCURRENCY", 4))


def judge_record_check(*, record: JudgeRecord) -> dict[str, Any]:
    """Ask the record's server one probe call; store and return what it found it accepts.

    Only LLM judges are probed; a server that cannot be reached is said so in ``fault``.
    """
    if record.kind != JudgeKind.OPENAI:
        raise JudgeRecordError(f"kind: {record.name!r} is a {record.kind} judge; nothing to ask")
    config = judge_record_llm_config(record)

    async def ask() -> dict[str, Any]:
        client = make_client(config)
        try:
            profile = await probe_server(
                client,
                model=config.model,
                temperature=config.temperature,
                timeout_s=min(config.timeout_s, 30.0),
                base_url=config.base_url,
                stream=config.stream,
            )
        finally:
            await client.close()
        return profile.as_dict()

    found = async_to_sync(ask)()
    found["model"] = config.model
    failed = [
        n
        for n in found.get("notes", [])
        if n.startswith(("probe failed", "probe inconclusive", "probe refused", "server fault"))
    ]
    found["ok"] = not failed
    found["problem"] = failed[0] if failed else ""
    found["base_url"] = config.base_url or ""
    JudgeRecord.objects.filter(pk=record.pk).update(probe=found, probed_at=timezone.now())
    record.probe, record.probed_at = found, timezone.now()
    return found


def judge_probe_summary(found: dict[str, Any]) -> str:
    """What a check found, in one line for a maintainer."""
    if not found.get("ok", True):
        where = found.get("base_url") or "the default URL"
        return f"not usable: the server at {where} ({found.get('model')}): {found['problem']}"
    parts = [
        f"model {found.get('model')}",
        f"format {found.get('response_format')}",
        f"token parameter {found.get('token_param')}",
        f"seed {'yes' if found.get('send_seed') else 'no'}",
        f"temperature {'yes' if found.get('send_temperature') else 'no'}",
        f"streaming {'yes' if found.get('stream') else 'no'}",
    ]
    if found.get("server"):
        parts.append(f"server {found['server']}")
    if found.get("context_tokens"):
        parts.append(f"context {found['context_tokens']} tokens")
    if found.get("slots"):
        parts.append(f"{found['slots']} slots")
    if found.get("reasoning"):
        parts.append("reasons before answering")
    return ", ".join(parts)


def judge_record_import_bundle(
    *, name: str, bundle_path: str | Path, folder: str | Path | None = None, replace: bool = False
) -> tuple[JudgeRecord, int]:
    """A replay judge answering with an audit run bundle's recorded verdicts: its rows are
    written to ``folder`` (default ``MEDIA_ROOT/replays/NAME``) in the ``replay:DIR`` layout, and
    a replay record ``name`` points at it. A run made with it on the same scan findings and
    truth gets the bundle's verdicts without a call. Returns the record and the repos written.

    Only a bundle that verifies is imported: one whose verdicts do not give its metrics, or
    whose checksums fail, would replay something other than the entry it claims to be.
    """
    try:
        bundle = read_bundle_file(bundle_path)
        files = audit_replay_files(bundle)
        bad = [c for c in verify(bundle) if not c.ok]
    except BundleError as exc:
        raise JudgeBundleError(f"bundle: {exc}") from None
    if bad:
        raise JudgeRecordError(f"bundle: does not verify ({len(bad)} mismatch): {bad[0].line()}")
    if not files:
        raise JudgeRecordError("bundle: holds no audit repo to replay")
    # Checked before the name becomes a folder: "../x" must never be written anywhere.
    if not re.fullmatch(JUDGE_NAME_RE, name):
        raise JudgeRecordError("name: letters, digits, '.', '_' and '-' only (no ':'), at most 80")
    target = Path(folder) if folder else Path(settings.MEDIA_ROOT) / "replays" / name
    if not replace and JudgeRecord.objects.filter(name=name).exists():
        raise JudgeRecordError(f"name: a judge record {name!r} exists; --replace updates it")
    paths = {project: _inside(target, f"{project}_results.json") for project in files}
    try:
        target.mkdir(parents=True, exist_ok=True)
        for project, rows in files.items():
            paths[project].write_text(json.dumps(rows), encoding="utf-8")
    except OSError as exc:
        raise JudgeRecordError(f"base_url: cannot write {target}: {exc.strerror or exc}") from None
    record = judge_record_create(
        name=name, kind=JudgeKind.REPLAY, base_url=str(target.resolve()), replace=replace
    )
    return record, len(files)
