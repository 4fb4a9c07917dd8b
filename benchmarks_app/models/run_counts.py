"""How many runs there are per benchmark, status and visibility key, kept by the database.

The home page shows each benchmark's runs and runs under way; counting them from the run
table grew with the number of runs (28 ms at 300,000 on SQLite, a parallel sequential scan of
34-59 ms on PostgreSQL). These rows are summed instead: their number depends on the benchmarks,
statuses and phases, never on the runs. Triggers on the run table write them
(``services.run_counts``), so that every write path counts, ORM or not.
"""

from __future__ import annotations

from django.db import models

from benchmarks_app.models.runs import Benchmark, RunStatus


class RunCount(models.Model):
    """A number of runs (or a change to it) with one benchmark, status, phase and entry kind.

    Several rows may share a key (on PostgreSQL each statement that writes runs appends its
    own change, so that no two writers ever wait on one counter row); a key's count is the sum
    of its rows. The sweeper folds them into one row per key.
    """

    benchmark = models.CharField(max_length=10, choices=Benchmark.choices)
    status = models.CharField(max_length=10, choices=RunStatus.choices)
    # The run's phase id, 0 for none: a plain number, so that a key is one value (NULL never
    # equals NULL) and a phase's reveal changes no row (the reader asks which are hidden).
    phase_key = models.BigIntegerField(default=0)
    # The run is a checklist team's entry (``checklist_submission`` set): seen by its team
    # and staff only.
    checklist_entry = models.BooleanField(default=False)
    # Negative in a change row (a run deleted, or moved to another key).
    runs = models.BigIntegerField(default=0)

    class Meta:
        indexes = [
            # The SQLite trigger finds its key's row by this index (one row per key there).
            models.Index(
                fields=["benchmark", "status", "phase_key", "checklist_entry"],
                name="run_count_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.status}/phase {self.phase_key}: {self.runs}"
