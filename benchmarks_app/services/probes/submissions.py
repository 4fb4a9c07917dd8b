"""Submitting a model's responses to a probe suite, and queueing their scoring.

A submission is stored whole or not at all, and always together with the run that scores it;
the scoring itself happens on the queue (:mod:`benchmarks_app.services.probes.processing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    ProbeSuite,
    Response,
    ResponseSubmission,
)
from benchmarks_app.services.probes.ownership import (
    ProbeOwnershipError,
    model_name_normalize,
    model_name_refusal,
)
from benchmarks_app.services.probes.refusal import (
    RefusalSignalError,
    refusal_config,
    run_judge_name,
)
from benchmarks_app.services.probes.rules import judge_config, pattern_rules_install_defaults
from benchmarks_app.services.runs import run_create
from benchmarks_app.services.uploads import upload_too_large
from scoring.probes.io import (
    ProbeFormatError,
    check_responses,
    detect_format,
    parse_responses,
)
from scoring.probes.types import ResponseSpec


def _run_config(suite: ProbeSuite, source: str = "suite") -> dict[str, Any]:
    """The rules, settings and refusal signal a run of ``suite`` is scored with (frozen)."""
    try:
        refusal = refusal_config(suite)
    except RefusalSignalError as exc:
        raise ProbeFormatError(source, [f"field 'suite': {exc}"]) from exc
    return {**judge_config(), "refusal": refusal}


@transaction.atomic
def probe_submission_submit(
    *,
    suite_name: str,
    model_name: str,
    responses: Sequence[ResponseSpec] | None = None,
    text: str | None = None,
    fmt: str = "jsonl",
    source_name: str = "",
    owner: Any = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """Store one model's responses to a suite and queue their scoring; all or nothing.

    Either ``responses`` or ``text`` (a JSONL or XSTest completions file) is given. Unknown
    probe ids, duplicates, empty outputs and probes left unanswered are all reported by id.

    ``owner`` is the submitting user (None for the management command). A model name on a
    suite belongs to its first submitter; anybody else but staff gets a
    :class:`ProbeOwnershipError` (see :func:`model_name_refusal`).
    """
    source = source_name or f"{fmt} responses"
    suite = ProbeSuite.objects.filter(name=suite_name).first()
    if suite is None:
        raise ProbeFormatError(source, [f"field 'suite': no probe suite named {suite_name!r}"])
    model_name = model_name_normalize(model_name=model_name, source=source)
    # Checked first, unlocked, so that nobody parses a large file only to be refused...
    refusal = model_name_refusal(suite=suite, model_name=model_name, owner=owner)
    if refusal:
        raise ProbeOwnershipError(source, refusal)
    if responses is None:
        responses = parse_responses(text or "", fmt, source)
    probes = {p.probe_id: p for p in suite.probes.all()}
    if not probes:
        raise ProbeFormatError(source, [f"suite {suite_name!r} has no probes; import them first"])
    check_responses(list(responses), probes.keys(), source)
    config = _run_config(suite, source)
    if not config["rules"]:
        pattern_rules_install_defaults()
        config = _run_config(suite, source)
    # ...and again under a lock on the suite, held until commit: of two users claiming a new
    # name at once, the second waits here and then sees the first one's submission. (SQLite
    # has no row locks, but its IMMEDIATE transactions already serialize writers.)
    ProbeSuite.objects.select_for_update().get(pk=suite.pk)
    refusal = model_name_refusal(suite=suite, model_name=model_name, owner=owner)
    if refusal:
        raise ProbeOwnershipError(source, refusal)
    submission = ResponseSubmission.objects.create(
        suite=suite,
        model_name=model_name,
        owner=owner if getattr(owner, "is_authenticated", False) else None,
        source_name=source_name[:300],
    )
    Response.objects.bulk_create(
        [
            Response(
                submission=submission,
                probe=probes[r.probe_id],
                output=r.output,
                human_label=r.human_label,
            )
            for r in responses
        ],
        batch_size=1000,
    )
    return run_create(
        benchmark=Benchmark.PROBES,
        judge=run_judge_name(config["refusal"]),
        judge_config=config,
        created_by=owner,
        enqueue=enqueue,
        probe_submission=submission,
    )


@transaction.atomic
def probe_submission_upload(
    *,
    suite_name: str,
    model_name: str,
    upload: UploadedFile,
    fmt: str | None = None,
    owner: Any = None,
    enqueue: bool = True,
) -> EvaluationRun:
    """``probe_submission_submit`` for an uploaded file, as the web form sends it.

    Applies the API's upload checks first (size before reading, UTF-8) with the API's
    messages; ``fmt`` empty means detect it from the file name, as the API does.
    """
    name = upload.name or "upload"
    too_large = upload_too_large(upload.size, name)
    if too_large:
        raise ProbeFormatError(name, [too_large])
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProbeFormatError(name, [f"{name}: not UTF-8 text"]) from exc
    return probe_submission_submit(
        suite_name=suite_name,
        model_name=model_name,
        text=text,
        fmt=fmt or detect_format(name, text),
        source_name=name,
        owner=owner,
        enqueue=enqueue,
    )


@transaction.atomic
def probe_submission_rescore(
    *, submission: ResponseSubmission, created_by: Any = None
) -> EvaluationRun:
    """Queue a new run of a submission with the rules and the suite's refusal signal as they
    are now (results are appended)."""
    config = _run_config(submission.suite)
    return run_create(
        benchmark=Benchmark.PROBES,
        judge=run_judge_name(config["refusal"]),
        judge_config=config,
        created_by=created_by,
        probe_submission=submission,
    )
