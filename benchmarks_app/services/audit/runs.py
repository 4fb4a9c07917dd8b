"""Creating audit evaluation runs: the judge, repos and settings a run asks for, checked.

A run judges the scan result versions that were current when it was created
(:class:`AuditRunScan`); results imported later become new versions and never change what a
run judged, also when it resumes (see :mod:`benchmarks_app.services.audit.processing`).

A run also records the dataset release whose frozen truth it judges (``run.release``): the
one asked for, else the official (or latest published) release of the dataset asked for, else
that of the only dataset whose release covers the repos. Repos that no release covers are
judged against the current truth (``release`` empty): such a run is on no board.

A participant's run also records the phase it was submitted in and the method it carries
(name, description, link); its scanner's owner may choose it to stand for the scanner on
its board (:func:`audit_run_choose`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    Phase,
    Repo,
    RunStatus,
    Scanner,
    ScanResult,
)
from benchmarks_app.models.audit import AuditDataset, AuditRunScan, DatasetRelease
from benchmarks_app.models.judge_records import JudgeKind, JudgeRecord
from benchmarks_app.selectors.audit_board_results import board_judge_key, release_repo_ids
from benchmarks_app.selectors.audit_boards import published_release
from benchmarks_app.selectors.visibility import scanners_hidden_from_public, unrevealed_phase_open
from benchmarks_app.services.audit.boards import audit_board_update
from benchmarks_app.services.entry_metadata import method_metadata_check
from benchmarks_app.services.judge_records import judge_record_find
from benchmarks_app.services.runs import run_create
from scoring.audit.judges import JudgeSpec, ReplayAuditJudge, parse_judge_spec


class AuditRunError(ValueError):
    """A run that cannot be created as asked; the message says which argument and why."""


def _setting(name: str, default: Any) -> Any:
    """A Django setting, or ``default`` where the site leaves it out (shared by this package)."""
    return getattr(settings, name, default)


def entry_metadata(
    *, method_name: Any = "", method_description: Any = "", method_url: Any = ""
) -> dict[str, str]:
    """The method an entry carries, checked (see ``services.entry_metadata``).

    Raises :class:`AuditRunError` naming the field.
    """
    values, problems = method_metadata_check(
        method_name=method_name, method_description=method_description, method_url=method_url
    )
    if problems:
        field, problem = next(iter(problems.items()))  # "field: problem", one at a time
        raise AuditRunError(f"{field}: {problem}")
    return values


def _on_behalf_phase(
    *, scanner: Scanner, release: DatasetRelease | None, created_by: Any
) -> Phase | None:
    """The phase of a run made without one on a hidden entrant's behalf (by staff, a command
    or a new release's re-evaluation; issue 36): the release's hidden phase open now. A run
    outside every phase would put the entrant on the public boards, pages and bundles that
    its phase keeps it off, so with no such phase the run is refused until the reveal.

    The entrant's own runs are theirs to place; any other scanner is left as it is.
    """
    if scanner.owner_id is not None and scanner.owner_id == getattr(created_by, "pk", None):
        return None
    if not scanners_hidden_from_public([scanner.pk]):
        return None
    phase = unrevealed_phase_open(release) if release is not None else None
    if phase is None:
        raise AuditRunError(
            f"scanner: {scanner.name!r} is an entrant of a hidden phase not yet revealed, and "
            "no hidden phase of this release is open: evaluate it after the reveal"
        )
    return phase


@transaction.atomic
def audit_run_create(
    *,
    scanner: Scanner,
    repos: Sequence[Repo] | None = None,
    judge: str | None = None,
    model: str | None = None,
    iterations: int | None = None,
    batch_size: int | None = None,
    json_mode: bool | None = None,
    created_by: Any = None,
    enqueue: bool = True,
    dataset: AuditDataset | None = None,
    release: DatasetRelease | None = None,
    phase: Phase | None = None,
    metadata: dict[str, str] | None = None,
) -> EvaluationRun:
    """Create (and enqueue) a run scoring ``scanner`` on ``repos`` (default: all it covers in
    the release) against the truth of ``release`` (see the module's docstring), in ``phase``
    (of that release) with the method ``metadata`` (see :func:`entry_metadata`)."""
    record, spec = audit_judge_resolve(judge or _setting("JUDGE_DEFAULT", "offline"))
    if spec.kind == "replay" and not Path(spec.argument).is_dir():
        raise AuditRunError(f"judge: replay folder {spec.argument!r} does not exist")
    if (
        spec.kind == "openai"
        and not (record is not None and record.base_url)
        and not (_setting("OPENAI_API_KEY", "") or _setting("OPENAI_BASE_URL", None))
    ):
        raise AuditRunError("judge: openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) to be set")
    for name, value in (("iterations", iterations), ("batch_size", batch_size)):
        if value is not None and value < 1:
            raise AuditRunError(f"{name}: must be at least 1, got {value}")
    current = {r.repo_id: r for r in ScanResult.objects.current().filter(scanner=scanner)}
    release = _run_release(
        dataset=dataset,
        release=release,
        repo_ids=[r.pk for r in repos] if repos is not None else list(current),
        explicit=repos is not None,
    )
    if phase is None:
        phase = _on_behalf_phase(scanner=scanner, release=release, created_by=created_by)
    in_release = release_repo_ids(release) if release is not None else None
    covered = {pk for pk in current if in_release is None or pk in in_release}
    # A replay judge can only answer for the repos its folder has recorded results for.
    replayable = ReplayAuditJudge.recorded_repos(spec.argument) if spec.kind == "replay" else None
    if repos is None:
        candidates = Repo.objects.filter(pk__in=covered).order_by("project_id")
        chosen = [r for r in candidates if replayable is None or r.project_id in replayable]
        if not chosen:
            where = (
                f" that {spec.argument!r} has recorded results for"
                if replayable is not None
                else ""
            )
            if release is not None:
                where += f" in {release}"
            raise AuditRunError(
                f"scanner: {scanner.name!r} has no imported results{where} to evaluate"
            )
    else:
        chosen = list(repos)
        outside = [
            r.project_id for r in chosen if in_release is not None and r.pk not in in_release
        ]
        if outside:
            raise AuditRunError(f"repo: {', '.join(outside)} not in {release}")
        missing = [r.project_id for r in chosen if r.pk not in covered]
        if missing:
            raise AuditRunError(
                f"repo: scanner {scanner.name!r} has no results for {', '.join(missing)}"
            )
        unrecorded = [
            r.project_id
            for r in chosen
            if replayable is not None and r.project_id not in replayable
        ]
        if unrecorded:
            raise AuditRunError(
                f"repo: replay folder {spec.argument!r} has no recorded results for "
                f"{', '.join(unrecorded)}"
            )
        if not chosen:
            raise AuditRunError("repo: no repo selected")
    config: dict[str, Any] = {
        "iterations": iterations or _setting("JUDGE_ITERATIONS", 3),
        "batch_size": batch_size or _setting("JUDGE_BATCH_SIZE", 10),
    }
    if record is not None and record.name not in ("offline", "openai"):
        # A curated judge has its own board, named after it.
        config["board"] = record.name
    if spec.kind == "openai":
        allowed = list(_setting("JUDGE_MODELS", []) or [])
        curated = record.model if record is not None else ""
        config["model"] = model or curated or _setting("JUDGE_MODEL", "o4-mini")
        # The operator decides which (paid) models runs may use; a curated record's own
        # model is the maintainers' choice already.
        if allowed and config["model"] != curated and config["model"] not in allowed:
            raise AuditRunError(
                f"model: {config['model']!r} is not one of the configured JUDGE_MODELS "
                f"({', '.join(allowed)})"
            )
        config["json_mode"] = bool(
            _setting("JUDGE_JSON_MODE", False) if json_mode is None else json_mode
        )
    if phase is not None and (release is None or phase.release_id != release.pk):
        raise AuditRunError(f"phase: {phase.name} is not a phase of {release or 'this run'}")
    run = run_create(
        benchmark=Benchmark.AUDIT,
        scanner=scanner,
        release=release,
        repos=chosen,
        judge=spec.label,
        judge_config=config,
        judge_record=record,
        created_by=created_by,
        enqueue=enqueue,
        phase=phase,
        **(metadata or {}),
    )
    # The task is sent once this transaction commits, so it always finds the versions.
    AuditRunScan.objects.bulk_create(
        AuditRunScan(run=run, repo=repo, scan_result=current[repo.pk]) for repo in chosen
    )
    return run


def audit_judge_resolve(text: str) -> tuple[JudgeRecord | None, JudgeSpec]:
    """The judge record ``--judge`` names (a record's name, or a legacy spelling mapped to its
    default record) and the audit judge it makes. Raises :class:`AuditRunError`."""
    record = judge_record_find(text)
    if record is not None and record.name == text.strip():
        argument = record.base_url if record.kind == JudgeKind.REPLAY else ""
        return record, JudgeSpec(str(record.kind), argument)
    try:
        spec = parse_judge_spec(text)
    except ValueError:
        names = ", ".join(JudgeRecord.objects.values_list("name", flat=True)[:20])
        raise AuditRunError(
            f"judge: {text!r} is not one of offline, openai, replay:DIR, "
            f"nor a judge record ({names or 'none yet'})"
        ) from None
    return (record if spec.kind == "openai" else None), spec


def _run_release(
    *,
    dataset: AuditDataset | None,
    release: DatasetRelease | None,
    repo_ids: list[int],
    explicit: bool,
) -> DatasetRelease | None:
    """The release a run judges (see the module's docstring)."""
    if release is not None:
        if dataset is not None and release.dataset_id != dataset.pk:
            raise AuditRunError(f"release: {release} is not a release of {dataset.slug}")
        if not release.is_published:
            raise AuditRunError(f"release: {release} is not published; publish it first")
        return release
    if dataset is not None:
        chosen = published_release(dataset)
        if chosen is None:
            raise AuditRunError(f"dataset: {dataset.slug} has no published release yet")
        return chosen
    wanted = set(repo_ids)
    candidates = []
    for ds in AuditDataset.objects.filter(repos__in=wanted).distinct().order_by("slug"):
        found = published_release(ds)
        if found is None:
            continue
        covered = release_repo_ids(found) & wanted
        # Chosen repos must all be in it; otherwise any overlap with the scanner's repos.
        if covered and (not explicit or covered == wanted):
            candidates.append(found)
    if len(candidates) > 1:
        names = ", ".join(c.dataset.slug for c in candidates)
        raise AuditRunError(
            f"dataset: the repos are in several datasets ({names}); choose one (--dataset)"
        )
    return candidates[0] if candidates else None


def run_release_for(
    *, dataset: AuditDataset | None, repos: Sequence[Repo]
) -> DatasetRelease | None:
    """The release a participant's run on ``repos`` will judge (to find its open phase)."""
    return _run_release(
        dataset=dataset, release=None, repo_ids=[r.pk for r in repos], explicit=True
    )


@transaction.atomic
def audit_run_choose(*, user: Any, run: EvaluationRun, chosen: bool = True) -> EvaluationRun:
    """Make ``run`` the entry that stands for its scanner on its board (``chosen=False``: the
    scanner's latest results stand again), and rewrite the boards it is on.

    Only the scanner's owner may choose, and only a complete, succeeded run with a release.
    One run is chosen per scanner, release and phase: choosing one unchooses the others.
    Raises :class:`PermissionError` or :class:`AuditRunError` (``"run: problem"``).
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to choose an entry")
    # of=("self",): PostgreSQL cannot lock the nullable side of the join to the scanner.
    locked = (
        EvaluationRun.objects.select_for_update(of=("self",))
        .select_related("scanner")
        .get(pk=run.pk)
    )
    scanner = locked.scanner
    if locked.benchmark != Benchmark.AUDIT or scanner is None:
        raise AuditRunError(f"run: #{locked.pk} is not an audit run")
    if scanner.owner_id is None or scanner.owner_id != user.pk:
        raise PermissionError(f"run: only the owner of {scanner.name!r} may choose its entry")
    if chosen:
        if locked.release_id is None:
            raise AuditRunError(f"run: #{locked.pk} judged no dataset release; it is on no board")
        if locked.status != RunStatus.SUCCEEDED or not locked.is_complete:
            raise AuditRunError(
                f"run: #{locked.pk} is {locked.status}"
                + ("" if locked.status != RunStatus.SUCCEEDED else ", not complete")
                + "; only a complete run can stand for the scanner"
            )
    if locked.release_id is None:
        return locked
    # Serialize choices of one scanner, so that two never end up chosen together.
    Scanner.objects.select_for_update(no_key=True).filter(pk=scanner.pk).first()
    others = EvaluationRun.objects.filter(
        benchmark=Benchmark.AUDIT,
        scanner=scanner,
        release_id=locked.release_id,
        phase=locked.phase,
        board_choice=True,
    ).exclude(pk=locked.pk)
    # The boards to rewrite: those of this run's judge and of any run it unchooses.
    judges = {board_judge_key(locked)} | {board_judge_key(r) for r in others}
    others.update(board_choice=False)
    if locked.board_choice != chosen:
        locked.board_choice = chosen
        locked.save(update_fields=["board_choice", "updated_at"])
    assert locked.release is not None
    # Only this scanner's entry changes: its row, then the boards' ranks.
    for judge in sorted(judges):
        for phase in [locked.phase, None] if locked.phase is not None else [None]:
            audit_board_update(
                release=locked.release, judge=judge, phase=phase, scanner_id=scanner.pk
            )
    return locked
