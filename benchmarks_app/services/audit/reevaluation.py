"""Evaluating a release's entries again: when maintainers make a new release official, its
board starts empty; this puts every scanner that was on a board of the dataset on the new
release, with the release's official judge, at no quota cost to the participants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from benchmarks_app.models import EvaluationRun, Scanner, ScanResult
from benchmarks_app.models.audit import AuditBoardRow, DatasetRelease
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.audit_board_results import board_judge_key, release_repo_ids
from benchmarks_app.selectors.audit_boards import official_judge, release_judges
from benchmarks_app.selectors.visibility import scanners_hidden_from_public, unrevealed_phase_open
from benchmarks_app.services.audit.runs import AuditRunError, audit_run_create


@dataclass
class ReleaseEvaluation:
    """What :func:`audit_release_evaluate_entries` did: the runs it queued, and why it left
    each other entry alone (scanner name → reason)."""

    release: DatasetRelease
    judge: str
    runs: list[EvaluationRun] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        text = f"{self.release}, judge {self.judge}: {len(self.runs)} entr"
        text += "y queued" if len(self.runs) == 1 else "ies queued"
        if self.skipped:
            text += f", {len(self.skipped)} left as they are (" + "; ".join(
                f"{name}: {why}" for name, why in sorted(self.skipped.items())
            )
            text += ")"
        return text


def release_entrants(release: DatasetRelease) -> list[Scanner]:
    """The scanners that were on any board of the release's dataset (any release, any judge),
    and still have results for at least one of this release's repos."""
    on_boards = AuditBoardRow.objects.filter(release__dataset_id=release.dataset_id).values(
        "scanner_id"
    )
    covering = (
        ScanResult.objects.current()
        .filter(repo_id__in=release_repo_ids(release))
        .values("scanner_id")
    )
    return list(Scanner.objects.filter(pk__in=on_boards).filter(pk__in=covering).order_by("name"))


@transaction.atomic
def audit_release_evaluate_entries(
    *, release: DatasetRelease, judge: str | None = None, created_by: Any = None
) -> ReleaseEvaluation:
    """Queue one run per entrant of ``release`` (:func:`release_entrants`) with ``judge``
    (default: the dataset's official judge for it). An entrant already on this board with its
    current results, or with a run of it still in progress, is left alone: repeating the
    action never queues the same work twice."""
    if not release.is_published:
        raise AuditRunError(f"release: {release} is not published; publish it first")
    chosen = judge or official_judge(release.dataset, release_judges(release))
    outcome = ReleaseEvaluation(release=release, judge=chosen)
    on_board = set(
        AuditBoardRow.objects.on_phase(None)
        .filter(release=release, judge=chosen, is_complete=True)
        .values_list("scanner_id", flat=True)
    )
    in_progress = {
        run.scanner_id
        for run in EvaluationRun.objects.filter(
            release=release, status__in=ACTIVE_STATUSES, scanner__isnull=False
        )
        if board_judge_key(run) == chosen
    }
    entrants = release_entrants(release)
    hidden = scanners_hidden_from_public([s.pk for s in entrants])
    # A hidden entrant's new run stays in a hidden phase of this release that is open now;
    # with none, it waits for the reveal (run again then): a run outside every phase would
    # put the entrant on the public boards, pages and bundles.
    hidden_phase = unrevealed_phase_open(release) if hidden else None
    for scanner in entrants:
        if scanner.pk in hidden and hidden_phase is None:
            outcome.skipped[scanner.name] = (
                "an entrant of a hidden phase not yet revealed; evaluate again after the reveal"
            )
            continue
        if scanner.pk in in_progress:
            outcome.skipped[scanner.name] = "a run is in progress"
            continue
        if scanner.pk in on_board:
            outcome.skipped[scanner.name] = "already on this board"
            continue
        # A board's judge key names an LLM judge's model after a colon (``openai:MODEL``).
        kind, _, model = chosen.partition(":")
        try:
            run = audit_run_create(
                scanner=scanner,
                release=release,
                judge=kind if kind == "openai" else chosen,
                model=(model or None) if kind == "openai" else None,
                created_by=created_by,
                phase=hidden_phase if scanner.pk in hidden else None,
            )
        except AuditRunError as exc:
            outcome.skipped[scanner.name] = str(exc)
            continue
        outcome.runs.append(run)
    return outcome
