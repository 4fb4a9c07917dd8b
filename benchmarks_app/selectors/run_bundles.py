"""A run's bundle: everything needed to re-score it offline, in one archive (scoring.bundles).

What goes in, per benchmark: the inputs the judge saw (scan findings; responses; papers'
answers), the judge record (its API key's variable name, never a key), the judge-call ledger
with prompts and raw answers, every verdict with its votes, and the stored metrics.

Hidden truth never leaves: the truth findings of a repo that is not public go in with their
position, id and severity only (what the metrics need), and the verdict explanations of such a
repo, the prompts that quote its truth and the raw answers to them are left out, whoever
downloads. Which runs a user may download is the caller's (``visible_runs``).

A participant's inputs go in as the run's phase (else ``settings.RUN_BUNDLE_INPUTS``) publishes
them to whoever is not the run's owner or staff (:func:`bundle_inputs_level`): ``all``,
``shown`` (what the public pages show: each scan finding's index and severity, and the titles
of the findings the run matched) or ``none``. Below ``all``, the free text that quotes the
inputs (verdict explanations, prompts, raw answers, feedback) is withheld too; what the
metrics are recomputed from always travels.

Each benchmark's members (inputs, verdicts, metrics) are built in
:mod:`benchmarks_app.selectors.run_bundle_members`; this module decides who gets which inputs,
adds the run, its judge and its ledger, and writes the archive.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from benchmarks_app.models import (
    Benchmark,
    BundleInputs,
    EvaluationRun,
    JudgeCall,
    JudgePrompt,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_bundle_members import (
    ALL,
    INPUT_LEVELS,
    INPUTS_WITHHELD,
    NONE,
    SHOWN,
    WITHHELD,
    audit_members,
    checklist_members,
    probe_members,
)
from benchmarks_app.selectors.visibility import is_entrant, is_staff
from scoring import bundles


def bundle_inputs_level(*, run: EvaluationRun, viewer: Any) -> str:
    """How much of the run's inputs ``viewer`` gets in its bundle: everything for the run's
    entrant and staff; for anyone else what the run's phase publishes (``bundle_inputs``),
    else the benchmark's default (``settings.RUN_BUNDLE_INPUTS``, "shown" unless set)."""
    if (
        viewer is not None
        and viewer.is_authenticated
        and (is_staff(viewer) or is_entrant(viewer, run))
    ):
        return ALL
    phase = run.phase if run.phase_id else None
    defaults = getattr(settings, "RUN_BUNDLE_INPUTS", {}) or {}
    policy = (phase.bundle_inputs if phase else "") or defaults.get(str(run.benchmark), "")
    if policy == BundleInputs.ALL:
        return ALL
    if policy == BundleInputs.NEVER:
        return NONE
    if policy == BundleInputs.AFTER_END:
        ended = phase is not None and phase.ends_at is not None and phase.ends_at <= timezone.now()
        return ALL if ended else SHOWN
    return SHOWN


class RunBundleError(ValueError):
    """A run that has no bundle (yet); the message says why."""


def run_bundle_name(run: EvaluationRun) -> str:
    return f"run-{run.pk}-{run.benchmark}.zip"


def public_url(url: str) -> str:
    """At most the scheme and host of ``url``: a judge's path, port, query and any
    credentials stay on the site, and a replay judge's folder (a path) is left out."""
    try:
        parts = urlsplit(url or "")
        host = parts.hostname
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not host:
        return ""
    return f"{parts.scheme}://{host}"


def _public_judge_label(label: str) -> str:
    """The run's judge as ``--judge`` spelt it, less a replay folder's path."""
    kind, _, argument = (label or "").partition(":")
    return kind if kind == "replay" and argument else label


def _scrub_urls(value: Any) -> Any:
    """``value`` with every ``base_url`` cut to scheme and host, at any depth (a judge's
    probe record keeps the URL it asked)."""
    if isinstance(value, dict):
        return {
            k: public_url(str(v or "")) if k == "base_url" else _scrub_urls(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub_urls(v) for v in value]
    return value


def _judge_record(run: EvaluationRun) -> dict[str, Any] | None:
    record = run.judge_record
    if record is None:
        return None
    # Field by field on purpose: a field added to the record later (a secret, say) is not
    # exported until someone decides it may be. The judge appears by name, model and server
    # (scheme and host): not the URL's path or credentials, not the key's variable.
    return {
        "name": record.name,
        "kind": record.kind,
        "base_url": public_url(record.base_url),
        "model": record.model,
        "max_answer_tokens": record.max_answer_tokens,
        "temperature": record.temperature,
        "concurrency": record.concurrency,
        "timeout_s": record.timeout_s,
    }


def _run_member(run: EvaluationRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "benchmark": run.benchmark,
        "target": run.target_label,
        "status": run.status,
        "is_complete": run.is_complete,
        "failed_items": run.failed_items,
        "judge": _public_judge_label(run.judge),
        "judge_config": _scrub_urls(
            {k: v for k, v in (run.judge_config or {}).items() if "key" not in k}
        ),
        "judge_record": _judge_record(run),
        "release": str(run.release) if run.release_id else None,
        "phase": str(run.phase) if run.phase_id else None,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


# --- The ledger -----------------------------------------------------------------------------


def _ledger(
    run: EvaluationRun,
    *,
    withheld: bool,
    public: list[str],
    secret: list[str],
    inputs_withheld: bool = False,
) -> dict[str, Any]:
    """The judge calls and the prompts they asked; with hidden truth in the run, a prompt (and
    the answers to it) only where it quotes public truth and no hidden truth."""
    calls = list(JudgeCall.objects.filter(run=run).order_by("created_at", "id"))
    keys = {c.prompt_key for c in calls if c.prompt_key}
    prompts: dict[str, dict[str, str]] = {}
    for p in JudgePrompt.objects.filter(key__in=keys):
        text = f"{p.system}\n{p.user}"
        # Every prompt quotes the participant's inputs: none travels unless they do.
        shown = not inputs_withheld and (
            not withheld or (any(t in text for t in public) and not any(t in text for t in secret))
        )
        if shown:
            prompts[p.key] = {"system": p.system, "user": p.user}
    rows = []
    for c in calls:
        shown = (not withheld and not inputs_withheld) or c.prompt_key in prompts
        gone = WITHHELD if withheld else INPUTS_WITHHELD
        rows.append(
            {
                "judge": c.judge,
                "model": c.model,
                "prompt_hash": c.prompt_hash,
                "prompt_key": c.prompt_key,
                "vote_number": c.vote_number,
                "attempt": c.attempt,
                "status": c.status,
                "latency_ms": c.latency_ms,
                "tokens_in": c.tokens_in,
                "tokens_out": c.tokens_out,
                "tokens_reasoning": c.tokens_reasoning,
                "tokens_cached": c.tokens_cached,
                "request": c.request,
                "error": c.error if shown else (gone if c.error else ""),
                "raw_response": c.raw_response if shown else (gone if c.raw_response else ""),
                "created_at": c.created_at.isoformat(),
            }
        )
    return {bundles.CALLS: rows, bundles.PROMPTS: prompts}


def run_bundle(*, run: EvaluationRun, inputs: str = ALL) -> bytes:
    """The run's bundle (a zip; see :mod:`scoring.bundles`) with ``inputs`` of the
    participant's inputs (:data:`INPUT_LEVELS`). Raises :class:`RunBundleError` for a run
    still being judged."""
    if run.status in ACTIVE_STATUSES:
        raise RunBundleError(f"run #{run.pk} is {run.status}: its bundle is made once it ends")
    if inputs not in INPUT_LEVELS:
        raise RunBundleError(f"inputs: {inputs!r} is not one of {', '.join(INPUT_LEVELS)}")
    withheld, public, secret = False, list[str](), list[str]()
    if run.benchmark == Benchmark.AUDIT:
        members, withheld, public, secret = audit_members(run, level=inputs)
    elif run.benchmark == Benchmark.PROBES:
        members = probe_members(run, level=inputs)
    else:
        members = checklist_members(run, level=inputs)
    members[bundles.RUN] = {**_run_member(run), "inputs": inputs}
    members.update(
        _ledger(
            run,
            withheld=withheld,
            public=public,
            secret=secret,
            inputs_withheld=inputs != ALL,
        )
    )
    return bundles.write_bundle(
        benchmark=str(run.benchmark), run_id=int(run.pk), members=members, truth_withheld=withheld
    )
