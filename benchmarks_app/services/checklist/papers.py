"""One uploaded paper: reading it from a request, checking its size, extracting its checklist.

These helpers sit below both the web views and the API, which read uploads the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from benchmarks_app.models import ChecklistQuestion, PaperKind
from benchmarks_app.rate_limits import (
    Allowance,
    allowances_count,
    allowances_spent,
    allowances_take,
)
from benchmarks_app.services.checklist.errors import ChecklistSubmissionError
from benchmarks_app.services.reader_slots import PaperChecksRateExceeded, reader_slot_hold
from benchmarks_app.services.uploads import upload_max_bytes, upload_too_large
from scoring.checklist.extract import (
    ExtractedPaper,
    ExtractionError,
    Limits,
    PdfLimits,
    extract_paper_limited,
)

FIELD_FOR_KIND = {PaperKind.GENUINE: "genuine", PaperKind.ADVERSARIAL: "adversarial",
                  PaperKind.TRUTH: "truth"}  # fmt: skip


@dataclass(frozen=True)
class PaperUpload:
    """One uploaded file as the service sees it (views convert Django's UploadedFile)."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


def read_upload(
    upload: UploadedFile | None, field: str, *, what: str | None = None
) -> PaperUpload | None:
    """Read an uploaded file, refusing it before reading when it is over the size limit;
    ``what`` names it in the message ("genuine paper" by default for field "genuine")."""
    if upload is None:
        return None
    too_large = upload_too_large(upload.size, f"{what or field + ' paper'} {upload.name!r}")
    if too_large:
        raise ChecklistSubmissionError(too_large, field=field)
    return PaperUpload(name=upload.name or field, data=upload.read())


def _word_cap() -> int:
    return int(getattr(settings, "CHECKLIST_BODY_WORD_CAP", 15000))


def paper_read_limits() -> tuple[PdfLimits, Limits]:
    """The limits of the PDF checks and of the child process, from settings: CPU time is the
    bound (PDF_PARSE_TIMEOUT_S), the wall time only a backstop (PDF_PARSE_WALL_S), so that a
    loaded machine, which gives the child a fraction of a core, cannot refuse a genuine paper."""
    pdf = PdfLimits(
        max_pages=settings.PDF_MAX_PAGES,
        max_content_bytes=settings.PDF_MAX_CONTENT_MB * 2**20,
        max_operators=settings.PDF_MAX_OPERATORS,
        max_nesting=settings.PDF_MAX_NESTING,
    )
    child = Limits(
        cpu_seconds=float(settings.PDF_PARSE_TIMEOUT_S),
        wall_seconds=float(settings.PDF_PARSE_WALL_S),
        memory_mb=settings.PDF_PARSE_MEMORY_MB,
        nice=settings.PDF_PARSE_NICE,
    )
    return pdf, child


def paper_read(
    data: bytes, filename: str, *, strict: bool, slot_wait_s: float = 0.0
) -> ExtractedPaper:
    """A paper's checklist, read in a child process under the limits of settings, holding one
    of the site's reader slots (:mod:`benchmarks_app.services.reader_slots`; ReadersBusy when
    none frees within ``slot_wait_s``). Any other failure (a limit included) is an
    ExtractionError naming the file. Web forms, the API and the management commands all read
    papers through this."""
    pdf, child = paper_read_limits()
    with reader_slot_hold(wait_s=slot_wait_s) as heartbeat:
        return extract_paper_limited(
            data,
            filename,
            word_cap=_word_cap(),
            strict=strict,
            pdf_limits=pdf,
            limits=child,
            heartbeat=heartbeat,
        )


def _checks_key(user: object) -> str | None:
    pk = getattr(user, "pk", None)
    return f"paper-checks:user:{pk}" if getattr(user, "is_authenticated", False) else None


def paper_check_allowances() -> list[Allowance]:
    """``CHECKLIST_PAPER_CHECKS_PER_HOUR`` and ``CHECKLIST_PAPER_CHECKS_PER_10_MIN``."""
    return [
        Allowance(int(settings.CHECKLIST_PAPER_CHECKS_PER_HOUR), 3600, "this hour"),
        Allowance(int(settings.CHECKLIST_PAPER_CHECKS_PER_10_MIN), 600, "in the last 10 minutes"),
    ]


def _checks_refused(spent: tuple[Allowance, float]) -> PaperChecksRateExceeded:
    allowance, wait_s = spent
    return PaperChecksRateExceeded(
        f"You have had {allowance.limit} papers read without storing a submission "
        f"{allowance.wording} (previews, and submissions refused because a paper could not be "
        f"read); try again in {max(1, int(wait_s))} seconds.",
        retry_after_s=wait_s,
    )


def paper_checks_allowance_check(*, user: object) -> None:
    """PaperChecksRateExceeded, counting nothing, when ``user`` has spent the reads that store
    nothing (CHECKLIST_PAPER_CHECKS_PER_HOUR or _PER_10_MIN): asked before a submission's files
    are read, whose refusal would then count (:func:`paper_checks_count_refusal`)."""
    key = _checks_key(user)
    if key is None:
        return
    spent = allowances_spent(key=key, allowances=paper_check_allowances())
    if spent is not None:
        raise _checks_refused(spent)


def paper_checks_count_refusal(*, user: object) -> None:
    """A submission was refused at reading a paper: its read counts like a preview's."""
    key = _checks_key(user)
    if key is not None:
        allowances_count(key=key, allowances=paper_check_allowances())


def _extract(*, field: str, what: str, upload: PaperUpload, strict: bool) -> ExtractedPaper:
    limit = upload_max_bytes()
    if upload.size > limit:
        raise ChecklistSubmissionError(
            f"{what} {upload.name!r} is {upload.size / 2**20:.1f} MB; the upload limit "
            f"is {limit // 2**20} MB.",
            field=field,
        )
    if upload.size == 0:
        raise ChecklistSubmissionError(f"{what} {upload.name!r} is empty.", field=field)
    try:
        return paper_read(upload.data, upload.name, strict=strict)
    except ExtractionError as exc:
        raise ChecklistSubmissionError(f"{what}: {exc}", field=field) from exc


def checklist_extract_upload(*, kind: str, upload: PaperUpload) -> ExtractedPaper:
    """Size check and extraction of one file; errors name the field and the file.

    A submission is scored on all 15 questions, so a paper with a question missing or an
    answer that is not Yes/No/NA is refused here, with every missing question named."""
    field = FIELD_FOR_KIND[PaperKind(kind)]
    return _extract(field=field, what=f"{field} paper", upload=upload, strict=True)


def checklist_extract_preview(
    *, upload: PaperUpload, field: str = "file", user: object = None
) -> ExtractedPaper:
    """What extraction reads from a paper, per question, without storing anything or
    counting against a quota: missing questions are findings here, not errors. A file that
    cannot be read at all (not a PDF, no checklist section) still raises, naming ``field``.

    Each preview counts against ``user``'s reads that store nothing
    (CHECKLIST_PAPER_CHECKS_PER_HOUR and _PER_10_MIN; PaperChecksRateExceeded past either,
    before reading)."""
    key = _checks_key(user)
    if key is not None:
        spent = allowances_take(key=key, allowances=paper_check_allowances())
        if spent is not None:
            raise _checks_refused(spent)
    return _extract(field=field, what="paper", upload=upload, strict=False)


def questions_by_number() -> dict[int, ChecklistQuestion]:
    """The 15 checklist questions by number, which both uploads and imports answer."""
    questions = {q.number: q for q in ChecklistQuestion.objects.all()}
    if len(questions) < 15:
        raise ChecklistSubmissionError(
            "The checklist questions are not loaded (run the migrations)."
        )
    return questions
