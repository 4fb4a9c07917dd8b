"""An ended run's bundle, built once per variant and served from storage afterwards.

A bundle is immutable once its run ends, but building one reads every verdict, call and
prompt of the run (1.5-1.9 s of CPU for a large run). The first download of each variant (how
much of the participant's inputs it carries, :func:`bundle_inputs_level`) builds it and keeps
it in the default storage, which every worker and machine shares; later downloads read the
file. The file's name is a fingerprint of everything the bundle's contents depend on besides
the ended run's own rows (its status and last change, the repos whose truth is hidden, the
phase's publication, the judge record, the format's version): a run that is resumed and ends
again, a repo made public or a phase that ends gets a new file, never a stale one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from benchmarks_app.models import Benchmark, EvaluationRun
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_bundles import (
    RunBundleError,
    bundle_inputs_level,
    run_bundle,
)
from benchmarks_app.selectors.visibility import truth_details_visible
from scoring import bundles

# A complete bundle ends in the zip's end record (the writer adds no comment): a file caught
# half-written by a concurrent writer does not, and is built again rather than served.
_END_RECORD = b"PK\x05\x06"


def _folder(run: EvaluationRun) -> str:
    return f"{settings.RUN_BUNDLE_STORAGE_PREFIX}/{run.pk}"


def run_bundle_fingerprint(*, run: EvaluationRun, level: str) -> str:
    """What the stored file of ``run``'s ``level`` variant is named after."""
    phase = run.phase if run.phase_id else None
    record = run.judge_record if run.judge_record_id else None
    parts: list[Any] = [
        bundles.FORMAT,
        bundles.VERSION,
        level,
        run.pk,
        run.status,
        run.updated_at.isoformat() if run.updated_at else None,
        run.finished_at.isoformat() if run.finished_at else None,
        None if record is None else record.updated_at.isoformat(),
        None
        if phase is None
        else [phase.is_hidden, str(phase.revealed_at), str(phase.ends_at), phase.bundle_inputs],
    ]
    if run.benchmark == Benchmark.AUDIT:
        # The repos whose truth the public may not read (the policy's rule), so that a repo
        # made public (or hidden again) makes a new bundle.
        repos = run.repos.only("pk", "is_public").order_by("pk")
        parts.append([r.pk for r in repos if not truth_details_visible(None, r)])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


def run_bundle_fetch(*, run: EvaluationRun, viewer: Any) -> bytes:
    """``run``'s bundle as ``viewer`` may have it: read from storage when this variant was
    built before, else built and stored. Raises :class:`RunBundleError` for a run still being
    judged (nothing is stored for it)."""
    if run.status in ACTIVE_STATUSES:
        raise RunBundleError(f"run #{run.pk} is {run.status}: its bundle is made once it ends")
    level = bundle_inputs_level(run=run, viewer=viewer)
    name = f"{_folder(run)}/{level}-{run_bundle_fingerprint(run=run, level=level)}.zip"
    stored = _read(name)
    if stored is not None:
        return stored
    data = run_bundle(run=run, inputs=level)
    _store(name, data, level=level)
    return data


def _read(name: str) -> bytes | None:
    try:
        if not default_storage.exists(name):
            return None
        with default_storage.open(name, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return data if data[-22:-18] == _END_RECORD else None


def _store(name: str, data: bytes, *, level: str) -> None:
    """Keep ``data`` as ``name`` and drop this variant's older files; a concurrent writer of
    the same name wins (the storage gives the loser another name, deleted here)."""
    try:
        saved = default_storage.save(name, ContentFile(data))
        if saved != name:
            default_storage.delete(saved)
        folder = name.rsplit("/", 1)[0]
        current = name.rsplit("/", 1)[1]
        for old in default_storage.listdir(folder)[1]:
            if old.startswith(f"{level}-") and old != current:
                default_storage.delete(f"{folder}/{old}")
    except OSError:
        # A full or read-only disk costs the next download a rebuild, not this one its file.
        return
