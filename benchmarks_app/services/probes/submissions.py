"""Submitting a model's responses to a probe suite, and queueing their scoring.

A submission is stored whole or not at all, and always together with the run that scores it;
the scoring itself happens on the queue (:mod:`benchmarks_app.services.probes.processing`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    JudgeRecord,
    Phase,
    Probe,
    ProbeSuite,
    Response,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.selectors.phases import PhaseClosed, phase_limits, phase_open_for
from benchmarks_app.services.entry_metadata import method_metadata_check
from benchmarks_app.services.probes.boards import probe_board_refresh_for_submission
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
from benchmarks_app.services.uploads import (
    json_document_problem,
    upload_lines,
    upload_text_limits,
    upload_too_large,
)
from scoring.limits import TextLimits, too_long
from scoring.probes.io import (
    ProbeFormatError,
    RowCapExceeded,
    check_responses,
    detect_format,
    parse_responses,
)
from scoring.probes.types import ResponseSpec


class ProbeSubmissionRefused(ProbeFormatError):
    """Refused before anything was stored: no phase of the suite is open
    (``code="phase_closed"``) or the phase's quota is reached (``code="quota_exceeded"``).
    ``message`` says which, with the phase's dates or the limit."""

    def __init__(self, source: str, message: str, *, code: str, field: str = "suite") -> None:
        self.message = message
        self.code = code
        self.field = field
        super().__init__(source, [f"field '{field}': {message}"])


def method_metadata(
    *, method_name: str = "", method_description: str = "", method_url: str = "", source: str
) -> dict[str, str]:
    """The entry's method name, description and link, trimmed and checked; a
    :class:`ProbeFormatError` naming each bad field."""
    values, problems = method_metadata_check(
        method_name=method_name, method_description=method_description, method_url=method_url
    )
    if problems:
        raise ProbeFormatError(source, [f"field '{f}': {p}" for f, p in problems.items()])
    return values


def _phase_and_quota(suite: ProbeSuite, owner: Any, source: str) -> Phase | None:
    """The phase a submission made now lands in; refused when none is open or the owner
    reached the phase's daily or total limit (maintainers and staff are not limited)."""
    try:
        phase = phase_open_for(suite)
    except PhaseClosed as exc:
        raise ProbeSubmissionRefused(source, exc.message, code="phase_closed") from exc
    daily, total = phase_limits(phase)
    if phase is None or owner is None or getattr(owner, "is_staff", False):
        return phase
    mine = ResponseSubmission.objects.filter(phase=phase, owner_id=owner.pk)
    if total is not None and mine.count() >= total:
        raise ProbeSubmissionRefused(
            source,
            f"you have made {total} submission{pluralize(total)} in phase {phase.name!r}, "
            f"its limit per entrant",
            code="quota_exceeded",
        )
    if daily is not None:
        since = timezone.now() - timedelta(days=1)
        recent = list(
            mine.filter(created_at__gt=since)
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        if len(recent) >= daily:
            again = recent[len(recent) - daily] + timedelta(days=1)
            raise ProbeSubmissionRefused(
                source,
                f"you have made {daily} submission{pluralize(daily)} in phase {phase.name!r} "
                f"in the last 24 hours, its daily limit; the next is possible from "
                f"{again:%Y-%m-%d %H:%M} UTC",
                code="quota_exceeded",
            )
    return phase


def _run_config(suite: ProbeSuite, source: str = "suite") -> dict[str, Any]:
    """The rules, settings and refusal signal a run of ``suite`` is scored with (frozen)."""
    try:
        refusal = refusal_config(suite)
    except RefusalSignalError as exc:
        raise ProbeFormatError(source, [f"field 'suite': {exc}"]) from exc
    return {**judge_config(), "refusal": refusal}


def _whole_if_document(lines: Iterable[str]) -> str | Iterable[str]:
    """A JSON Lines stream as it comes, or its whole text where the first line starts a JSON
    document (an array or object spread over several lines): :func:`json_document_problem`
    then names that in one message. Reading the rest is bounded by ``UPLOAD_MAX_MB``."""
    rest = iter(lines)
    head: list[str] = []
    for line in rest:
        head.append(line)
        if line.strip():
            break
    first = head[-1].lstrip("\ufeff \t\r\n") if head else ""
    if first.startswith("{"):
        try:
            json.loads(first)
        except RecursionError:
            pass  # one line nested too deeply: the line-by-line reader names that
        except ValueError:
            return "".join(head) + "".join(rest)
    elif first.startswith("["):
        return "".join(head) + "".join(rest)  # never a JSON Lines record
    return itertools.chain(head, rest)


# Files people send to the wrong form, by their first bytes and by their name's ending.
WRONG_KINDS = (("%PDF-", ".pdf", "PDF"), ("PK\x03\x04", ".zip", "ZIP archive"))


def _wrong_kind(name: str, first_line: str | None) -> str | None:
    """What a file that is not a responses file is (a PDF paper, a zip of sources), if known."""
    for magic, suffix, kind in WRONG_KINDS:
        if (first_line is not None and first_line.startswith(magic)) or (
            first_line is None and name.lower().endswith(suffix)
        ):
            return kind
    return None


def _wrong_kind_message(name: str, kind: str) -> str:
    return (
        f"{name} is a {kind}, not a responses file: this form takes a model's responses to "
        "the suite's probes as JSON Lines, a JSON list or CSV, in UTF-8 text (one response "
        "per probe: probe_id and output); papers are submitted to the checklist challenge"
    )


def _upload_lines(upload: UploadedFile, name: str) -> Iterator[str]:
    """The upload's lines as they are read (:func:`upload_lines`), bytes that are not UTF-8
    being the file's problem; a PDF or a zip is named as such (a paper sent to this form)."""
    first = True
    try:
        for line in upload_lines(upload):
            if first and (kind := _wrong_kind(name, line)):
                raise ProbeFormatError(name, [_wrong_kind_message(name, kind)])
            first = False
            yield line
    except UnicodeDecodeError as exc:
        kind = _wrong_kind(name, None) if first else None
        message = _wrong_kind_message(name, kind) if kind else f"{name}: not UTF-8 text"
        raise ProbeFormatError(name, [message]) from exc


def _too_many_rows(suite_name: str, probes: int, max_rows: int, line: int | None = None) -> str:
    spare = max_rows - probes
    return (
        f"more than {max_rows:,} responses: suite {suite_name!r} has {probes:,} probe"
        f"{pluralize(probes)}, so at most {max_rows:,} rows are read (one per probe, plus "
        f"{spare} spare)" + (f"; reading stopped at line {line:,}" if line is not None else "")
    )


def probe_responses_count_problem(*, suite_name: str, count: int) -> str | None:
    """Why ``count`` responses to ``suite_name`` are too many (``None``: not too many, or no
    such suite, which the submission itself reports): checked on a request's raw list before
    a serializer validates each of its items."""
    probes = Probe.objects.filter(suite__name=suite_name).count()
    max_rows = probes + int(settings.PROBE_RESPONSES_EXTRA_ROWS)
    if not probes or count <= max_rows:
        return None
    return _too_many_rows(suite_name, probes, max_rows)


def response_fields_overlong(responses: Sequence[ResponseSpec], limits: TextLimits) -> list[str]:
    """``response N: field 'output': ...`` for each response field over its limit (numbered
    from 1, as given): responses sent as a list, not a file, get the same limits."""
    out = []
    for i, response in enumerate(responses, start=1):
        for name, value in (("probe_id", response.probe_id), ("output", response.output)):
            limit = limits.for_key(name)
            if len(value) > limit:
                out.append(too_long(f"response {i}: field '{name}'", len(value), limit))
    return out


@transaction.atomic
def probe_submission_submit(
    *,
    suite_name: str,
    model_name: str,
    responses: Sequence[ResponseSpec] | None = None,
    text: str | Iterable[str] | None = None,
    fmt: str = "jsonl",
    source_name: str = "",
    owner: Any = None,
    enqueue: bool = True,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """Store one model's responses to a suite and queue their scoring; all or nothing.

    Either ``responses`` or ``text`` (a JSONL or XSTest completions file, whole or as a
    stream of lines, which is read no further than the suite's row cap) is given. Unknown
    probe ids, duplicates, empty outputs and probes left unanswered are all reported by id.

    ``owner`` is the submitting user (None for the management command). A model name on a
    suite belongs to its first submitter; anybody else but staff gets a
    :class:`ProbeOwnershipError` (see :func:`model_name_refusal`).

    When the suite has phases the submission lands in the open one (and counts against its
    per-entrant limits); with none open it is refused with the phases' dates
    (:class:`ProbeSubmissionRefused`). ``method_*`` describe the entry on the board.
    """
    source = source_name or f"{fmt} responses"
    suite = ProbeSuite.objects.filter(name=suite_name).first()
    if suite is None:
        raise ProbeFormatError(source, [f"field 'suite': no probe suite named {suite_name!r}"])
    model_name = model_name_normalize(model_name=model_name, source=source)
    if owner is not None and not getattr(owner, "is_authenticated", False):
        raise ProbeOwnershipError(source, "sign in to submit responses")
    metadata = method_metadata(
        method_name=method_name,
        method_description=method_description,
        method_url=method_url,
        source=source,
    )
    phase = _phase_and_quota(suite, owner, source)
    probes = {p.probe_id: p for p in suite.probes.all()}
    if not probes:
        raise ProbeFormatError(source, [f"suite {suite_name!r} has no probes; import them first"])
    # One response per probe: a file with many more rows is refused while it is read, at the
    # first row past the cap, instead of after building a record of each of its rows.
    max_rows = len(probes) + int(settings.PROBE_RESPONSES_EXTRA_ROWS)
    limits = upload_text_limits()
    if responses is None:
        if fmt == "jsonl" and text is not None and not isinstance(text, str):
            text = _whole_if_document(text)
        document = (
            json_document_problem(text or "", source)
            if fmt == "jsonl" and isinstance(text, str)
            else None
        )
        if document:
            raise ProbeFormatError(source, [document])
        try:
            responses = parse_responses(text or "", fmt, source, max_rows=max_rows, limits=limits)
        except RowCapExceeded as exc:
            raise ProbeFormatError(
                source, [_too_many_rows(suite_name, len(probes), max_rows, exc.line)]
            ) from None
    else:
        if len(responses) > max_rows:
            raise ProbeFormatError(source, [_too_many_rows(suite_name, len(probes), max_rows)])
        overlong = response_fields_overlong(responses, limits)
        if overlong:
            raise ProbeFormatError(source, overlong)
    check_responses(list(responses), probes.keys(), source)
    config = _run_config(suite, source)
    if not config["rules"]:
        pattern_rules_install_defaults()
        config = _run_config(suite, source)
    # Whose name it is, only once the file has been checked (a bad file answers the same
    # under any name: nobody confirms a hidden phase's entrant without spending an entry),
    # and under a lock on the suite, held until commit: of two users claiming a new name at
    # once, the second waits here and then sees the first one's submission. (SQLite has no
    # row locks, but its IMMEDIATE transactions already serialize writers.)
    ProbeSuite.objects.select_for_update(no_key=True).get(pk=suite.pk)
    refusal = model_name_refusal(suite=suite, model_name=model_name, owner=owner)
    if refusal:
        raise ProbeOwnershipError(source, refusal)
    # Counted again under the lock: two uploads racing for the last slot get one.
    phase = _phase_and_quota(suite, owner, source)
    submission = ResponseSubmission.objects.create(
        suite=suite,
        model_name=model_name,
        owner=owner if getattr(owner, "is_authenticated", False) else None,
        source_name=source_name[:300],
        phase=phase,
        **metadata,
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
        **({"phase": phase} if phase is not None else {}),
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
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """``probe_submission_submit`` for an uploaded file, as the web form sends it.

    Applies the upload checks first (size before reading; UTF-8 as it is read), with the
    same messages on the form and the API; ``fmt`` empty means detect it from the file name
    (else its first character).
    """
    name = upload.name or "upload"
    too_large = upload_too_large(upload.size, name)
    if too_large:
        raise ProbeFormatError(name, [too_large])
    # Read as it is parsed, line by line: a file refused at its row cap is read no further.
    lines = _upload_lines(upload, name)
    first = next(lines, "")
    return probe_submission_submit(
        suite_name=suite_name,
        model_name=model_name,
        text=itertools.chain([first], lines),
        fmt=fmt or detect_format(name, first),
        source_name=name,
        owner=owner,
        enqueue=enqueue,
        method_name=method_name,
        method_description=method_description,
        method_url=method_url,
    )


@transaction.atomic
def probe_submission_rescore(
    *,
    submission: ResponseSubmission,
    created_by: Any = None,
    judge_record: JudgeRecord | None = None,
) -> EvaluationRun:
    """Queue a new run of a submission with the rules and the suite's refusal signal as they
    are now (results are appended). With an LLM ``judge_record``, refusals are judged by it
    (its server, model and options) whatever the suite's signal."""
    config = _run_config(submission.suite)
    if judge_record is not None:
        if judge_record.kind != "openai":
            raise ValueError(
                f"judge_record: {judge_record.name!r} is a {judge_record.kind} judge; refusals "
                "are judged by an LLM judge record"
            )
        refusal = config["refusal"] if config["refusal"].get("signal") == "openai" else {}
        config["refusal"] = {
            "signal": "openai",
            "model": judge_record.model or refusal.get("model") or settings.JUDGE_MODEL,
            "iterations": int(
                refusal.get("iterations")
                or getattr(settings, "PROBE_REFUSAL_JUDGE_ITERATIONS", 1)
                or 1
            ),
        }
    return run_create(
        benchmark=Benchmark.PROBES,
        judge=run_judge_name(config["refusal"]),
        judge_config=config,
        judge_record=judge_record,
        created_by=created_by,
        probe_submission=submission,
        **({"phase": submission.phase} if submission.phase_id is not None else {}),  # type: ignore[arg-type]
    )


class ProbeChoiceError(PermissionError):
    """The entry cannot be chosen; ``message`` says why (not the user's, or never scored)."""

    def __init__(self, message: str, *, code: str = "not_allowed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@transaction.atomic
def probe_submission_choose(*, user: Any, submission: ResponseSubmission) -> ResponseSubmission:
    """Make ``submission`` the entry that represents its model on its boards.

    One choice per (suite, model name, phase): choosing one unchooses the others. Only the
    submission's owner (or staff, for the maintainers' entries) may choose it, and only a
    scored one: a board row needs a report. The boards are rewritten before this returns.
    """
    if not (
        getattr(user, "is_staff", False)
        or (getattr(user, "is_authenticated", False) and submission.owner_id == user.pk)
    ):
        raise ProbeChoiceError("only the submission's owner may choose it as their entry")
    if not submission.reports.filter(run__status=RunStatus.SUCCEEDED).exists():
        raise ProbeChoiceError(
            f"submission {submission.pk} has no scored run yet; choose it once it is scored",
            code="not_scored",
        )
    ResponseSubmission.objects.filter(
        suite_id=submission.suite_id, model_name=submission.model_name, phase=submission.phase
    ).exclude(pk=submission.pk).update(board_choice=False)
    ResponseSubmission.objects.filter(pk=submission.pk).update(board_choice=True)
    submission.board_choice = True
    probe_board_refresh_for_submission(submission=submission)
    return submission
