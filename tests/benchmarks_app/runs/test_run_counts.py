"""The stored run counts (the home page's) equal a fresh count of the visible runs, whatever
path writes the runs: random histories of creates, bulk creates, status moves, phase moves and
reveals, deletes and cascades, checked after every step for four viewers."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from benchmarks_app.models import (
    Benchmark,
    ChecklistSubmission,
    EvaluationRun,
    Phase,
    ResponseSubmission,
    RunCount,
    RunStatus,
    Scanner,
)
from benchmarks_app.selectors.leaderboards import benchmark_summaries
from benchmarks_app.selectors.run_counts import visible_run_counts
from benchmarks_app.selectors.visibility import visible_runs
from benchmarks_app.services.run_counts import (
    run_counts_fold,
    run_counts_reconcile,
    run_counts_triggers_missing,
    run_counts_uninstall,
)
from benchmarks_app.tasks.runs import sweep_runs
from tests.factories.common import (
    ChecklistSubmissionFactory,
    ResponseSubmissionFactory,
    ScannerFactory,
    StaffFactory,
    TeamFactory,
    UserFactory,
    join,
)
from tests.factories.phases import ChecklistPhaseFactory

pytestmark = pytest.mark.django_db

STATUSES = [s.value for s in RunStatus]


def _fresh(user: Any) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for row in visible_runs(user).order_by().values("benchmark", "status").annotate(n=Count("*")):
        counts.setdefault(row["benchmark"], Counter())[row["status"]] += row["n"]
    return counts


def _stored(user: Any) -> dict[str, Counter[str]]:
    return {
        benchmark: Counter({s: n for s, n in statuses.items() if n})
        for benchmark, statuses in visible_run_counts(user).items()
        if any(statuses.values())
    }


class World:
    """Entrants of three owners (two teams), three phases, and runs written every way."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.owner = UserFactory.create()
        self.member = UserFactory.create()
        self.staff = StaffFactory.create()
        self.viewers = [AnonymousUser(), self.owner, self.member, self.staff]
        team, other_team = TeamFactory.create(), TeamFactory.create()
        join(self.member, team)
        self.teams = [team, other_team]
        self.phases = [
            ChecklistPhaseFactory.create(is_hidden=True),
            ChecklistPhaseFactory.create(is_hidden=True),
            ChecklistPhaseFactory.create(),
        ]

    def _target(self, benchmark: str) -> dict[str, Any]:
        rng = self.rng
        owner = rng.choice([self.owner, None])
        if benchmark == Benchmark.AUDIT:
            scanners = list(Scanner.objects.all()[:6])
            if len(scanners) < 6 or rng.random() < 0.2:
                return {"scanner": ScannerFactory.create(owner=owner)}
            return {"scanner": rng.choice(scanners)}
        if benchmark == Benchmark.PROBES:
            subs = list(ResponseSubmission.objects.all()[:6])
            if len(subs) < 6 or rng.random() < 0.2:
                return {"probe_submission": ResponseSubmissionFactory.create(owner=owner)}
            return {"probe_submission": rng.choice(subs)}
        entries = list(ChecklistSubmission.objects.all()[:6])
        if len(entries) < 6 or rng.random() < 0.2:
            return {
                "checklist_submission": ChecklistSubmissionFactory.create(
                    team=rng.choice(self.teams)
                )
            }
        return {"checklist_submission": rng.choice(entries)}

    def new_run(self) -> EvaluationRun:
        rng = self.rng
        benchmark = rng.choice([b.value for b in Benchmark])
        return EvaluationRun(
            benchmark=benchmark,
            status=rng.choice(STATUSES),
            phase=rng.choice([None, None, *self.phases]),
            created_by=rng.choice([None, self.owner, self.member]),
            **self._target(benchmark),
        )

    def some_runs(self) -> Any:
        ids = list(EvaluationRun.objects.values_list("pk", flat=True))
        return EvaluationRun.objects.filter(pk__in=self.rng.sample(ids, min(len(ids), 3)))

    def step(self) -> str:
        rng = self.rng
        action = rng.choice(
            [
                "create",
                "create",
                "bulk_create",
                "save_status",
                "update_status",
                "update_phase",
                "reveal",
                "hide",
                "delete_one",
                "delete_some",
                "delete_scanner",
                "delete_entry",
                "fold",
            ]
        )
        run = EvaluationRun.objects.order_by("?").first()
        if action == "create" or run is None:
            self.new_run().save()
        elif action == "bulk_create":
            EvaluationRun.objects.bulk_create([self.new_run() for _ in range(rng.randint(1, 5))])
        elif action == "save_status":
            run.status = rng.choice(STATUSES)
            run.save(update_fields=["status"])
        elif action == "update_status":
            self.some_runs().update(status=rng.choice(STATUSES), progress_done=0)
        elif action == "update_phase":
            self.some_runs().update(phase=rng.choice([None, *self.phases]))
        elif action == "reveal":
            Phase.objects.filter(pk=rng.choice(self.phases).pk).update(revealed_at=timezone.now())
        elif action == "hide":
            Phase.objects.filter(pk=rng.choice(self.phases).pk).update(
                is_hidden=True, revealed_at=None
            )
        elif action == "delete_one":
            run.delete()
        elif action == "delete_some":
            self.some_runs().delete()
        elif action == "delete_scanner":
            scanner = Scanner.objects.filter(runs__isnull=False).order_by("?").first()
            if scanner is not None:
                scanner.delete()  # its runs go by cascade
        elif action == "delete_entry":
            entry = ChecklistSubmission.objects.filter(runs__isnull=False).order_by("?").first()
            if entry is not None:
                entry.delete()
        else:
            run_counts_fold()
        return action


@pytest.mark.parametrize("seed", [1, 2])
def test_counts_equal_a_fresh_count_through_random_histories(seed: int) -> None:
    world = World(random.Random(seed))
    done: Counter[str] = Counter()
    for step in range(30):
        done[world.step()] += 1
        for viewer in world.viewers:
            assert _stored(viewer) == _fresh(viewer), (seed, step, done, viewer)
    # Every kind of write happened, and the history left runs in several keys.
    assert EvaluationRun.objects.exists()
    assert len(done) >= 10, done
    assert run_counts_reconcile(fix=False).keys_off == 0


def test_a_reveal_counts_at_once_and_staff_see_every_run() -> None:
    owner, stranger, staff = UserFactory.create(), UserFactory.create(), StaffFactory.create()
    phase = ChecklistPhaseFactory.create(is_hidden=True)
    scanner = ScannerFactory.create(owner=owner)
    EvaluationRun.objects.bulk_create(
        EvaluationRun(benchmark=Benchmark.AUDIT, scanner=scanner, phase=phase) for _ in range(4)
    )
    EvaluationRun.objects.create(benchmark=Benchmark.AUDIT, scanner=scanner)

    def audit_runs(user: Any) -> int:
        return {s.slug: s.run_count for s in benchmark_summaries(user)}[Benchmark.AUDIT]

    assert [audit_runs(u) for u in (AnonymousUser(), stranger, owner, staff)] == [1, 1, 5, 5]
    Phase.objects.filter(pk=phase.pk).update(revealed_at=timezone.now())
    assert audit_runs(AnonymousUser()) == 5
    # The queued runs are counted as under way, on the stored counts too.
    assert {s.slug: s.active_runs for s in benchmark_summaries(stranger)}[Benchmark.AUDIT] == 5


def test_the_sweep_folds_changes_into_one_row_per_key() -> None:
    scanner = ScannerFactory.create()
    runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(benchmark=Benchmark.AUDIT, scanner=scanner) for _ in range(3)
    )
    for run in runs:
        run.status = RunStatus.RUNNING
        run.save(update_fields=["status"])
    EvaluationRun.objects.filter(pk=runs[0].pk).update(status=RunStatus.SUCCEEDED)
    before = _fresh(AnonymousUser())
    sweep_runs()
    keys = RunCount.objects.values_list("benchmark", "status", "phase_key", "checklist_entry")
    assert sorted(keys) == sorted(set(keys))  # one row per key
    assert RunCount.objects.filter(runs=0).count() == 0
    assert _stored(AnonymousUser()) == before == {"audit": Counter(running=2, succeeded=1)}


def test_counts_made_without_triggers_are_found_and_corrected() -> None:
    # What a migration that rebuilds the run table on SQLite does: its triggers are gone.
    scanner = ScannerFactory.create()
    EvaluationRun.objects.create(benchmark=Benchmark.AUDIT, scanner=scanner)
    run_counts_uninstall()
    assert run_counts_triggers_missing()
    EvaluationRun.objects.create(benchmark=Benchmark.AUDIT, scanner=scanner)
    assert _stored(AnonymousUser()) == {"audit": Counter(queued=1)}
    with pytest.raises(CommandError, match="triggers were missing; 1 run count key"):
        call_command("run_counts", "--check")
    call_command("run_counts")
    assert run_counts_triggers_missing() == []
    assert _stored(AnonymousUser()) == {"audit": Counter(queued=2)}
    EvaluationRun.objects.create(benchmark=Benchmark.AUDIT, scanner=scanner)
    assert _stored(AnonymousUser()) == {"audit": Counter(queued=3)}
    call_command("run_counts", "--check")


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="PostgreSQL's flush truncates; no trigger fires"
)
@pytest.mark.django_db(transaction=True)
def test_a_flush_leaves_no_counts_behind() -> None:
    # SQLite's flush deletes table by table (firing the delete trigger, in no fixed order);
    # post_migrate after it reconciles the counts with the empty run table.
    scanner = ScannerFactory.create()
    EvaluationRun.objects.bulk_create(
        EvaluationRun(benchmark=Benchmark.AUDIT, scanner=scanner) for _ in range(3)
    )
    call_command("flush", interactive=False, verbosity=0)
    assert not EvaluationRun.objects.exists()
    assert _stored(AnonymousUser()) == {}
    assert run_counts_triggers_missing() == []
