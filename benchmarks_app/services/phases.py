"""Writes on phases: creating one, revealing a hidden phase's board."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from benchmarks_app.models import Benchmark, Challenge, DatasetRelease, Phase, ProbeSuite
from benchmarks_app.selectors.phases import PhaseTarget

# Boards that depend on a phase's visibility beyond the phase's own board: a probe suite's
# board of all entries and an audit release's whole board leave out a hidden phase's entries
# until it is revealed.
PHASE_BOARD_REFRESH: dict[str, str] = {
    Benchmark.PROBES: "benchmarks_app.services.probes.boards.probe_board_refresh_for_phase",
    Benchmark.AUDIT: "benchmarks_app.services.audit.boards.audit_boards_refresh_for_phase",
}


def phase_boards_refresh(*, phase: Phase) -> None:
    """Rewrite the boards that show ``phase``'s entries after its visibility or dates change."""
    dotted = PHASE_BOARD_REFRESH.get(phase.benchmark)
    if dotted is not None:
        import_string(dotted)(phase=phase)


def _benchmark_of(target: PhaseTarget) -> str:
    if isinstance(target, Challenge):
        return Benchmark.CHECKLIST
    if isinstance(target, DatasetRelease):
        return Benchmark.AUDIT
    if isinstance(target, ProbeSuite):
        return Benchmark.PROBES
    raise TypeError(f"a phase belongs to a challenge, a dataset release or a suite, not {target!r}")


@transaction.atomic
def phase_create(
    *,
    target: PhaseTarget,
    name: str,
    slug: str,
    starts_at: datetime,
    ends_at: datetime | None = None,
    is_hidden: bool = False,
    daily_limit: int | None = None,
    total_limit: int | None = None,
    description: str = "",
) -> Phase:
    benchmark = _benchmark_of(target)
    phase = Phase(
        benchmark=benchmark,
        name=name,
        slug=slug,
        description=description,
        starts_at=starts_at,
        ends_at=ends_at,
        is_hidden=is_hidden,
        daily_limit=daily_limit,
        total_limit=total_limit,
    )
    if benchmark == Benchmark.CHECKLIST:
        phase.challenge = target  # type: ignore[assignment]
    elif benchmark == Benchmark.AUDIT:
        phase.release = target  # type: ignore[assignment]
    else:
        phase.suite = target  # type: ignore[assignment]
    phase.full_clean()
    phase.save()
    return phase


@transaction.atomic
def phase_reveal(*, phase: Phase) -> Phase:
    """Make a hidden phase's board public (idempotent: revealing twice keeps the first time).

    A phase's own board rows are written while it is hidden too, so revealing changes who may
    read them; boards that also list the phase's entries are rewritten
    (:func:`phase_boards_refresh`).
    """
    locked = Phase.objects.select_for_update(no_key=True).get(pk=phase.pk)
    if locked.revealed_at is None:
        locked.revealed_at = timezone.now()
        locked.save(update_fields=["revealed_at", "updated_at"])
        phase_boards_refresh(phase=locked)
    return locked


@transaction.atomic
def phase_hide(*, phase: Phase) -> Phase:
    """Take a revealed hidden phase's board back to staff-only (a mistaken reveal)."""
    locked = Phase.objects.select_for_update(no_key=True).get(pk=phase.pk)
    locked.revealed_at = None
    locked.save(update_fields=["revealed_at", "updated_at"])
    phase_boards_refresh(phase=locked)
    return locked
