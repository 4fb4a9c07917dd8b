"""The run counts (``RunCount``): kept exact by database triggers, folded and reconciled here.

Why triggers, and not the services that write runs: runs are created, moved between statuses
and deleted by many paths (``run_state``, ``runs``, cancel, the sweeper, the admin, cascades
from a scanner, submission or team, ``QuerySet.update`` and ``bulk_create`` in imports and
benches, and whatever is added next). A counter kept by each path is exact only while none is
missed; a trigger on the run table sees every write, inside the writing transaction, so a
count commits or rolls back with the runs it counts. The key is what the run's visibility
depends on (``selectors.run_counts``): benchmark, status, phase, and whether it is a checklist
team's entry.

* **SQLite** (one writer at a time): row triggers add to the key's single row, creating it on
  first use. The table stays one row per key.
* **PostgreSQL**: a statement trigger on INSERT and on DELETE appends one change row per key
  the statement touched (a ``bulk_create`` of 2,000 runs or a cascade of 100,000 deletes
  appends a few rows), and a row trigger on UPDATE, guarded by ``WHEN`` so that progress
  updates never run it, appends -1 for the old key and +1 for the new one. Appending, never
  updating a shared row, means no writer waits on another's counter lock and no two
  transactions can deadlock over counters taken in different orders.
* :func:`run_counts_fold` (the sweeper, every minute) sums each key's rows into one, in one
  statement (PostgreSQL's ``DELETE ... RETURNING`` feeding the ``INSERT``: one snapshot, so a
  change committed meanwhile is either folded or left for the next fold, never lost or
  counted twice). Between folds a read sums a minute's changes at most.
* :func:`run_counts_reconcile` compares the rows' sums with a fresh ``COUNT(*)`` of the runs
  and appends the difference, in one statement as well (runs and their changes commit
  together, so one snapshot sees both consistently): on a healthy database it appends
  nothing. ``post_migrate`` installs the triggers (SQLite drops a table's triggers when a
  migration rebuilds the table) and reconciles, which also fills the table on a database
  whose runs predate it, and corrects it after a test database's flush (``DELETE FROM`` on
  SQLite fires the triggers, in no fixed order of tables). ``manage.py run_counts`` runs the
  same check by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from benchmarks_app.models import EvaluationRun, RunCount

TRIGGER_VERSION = "v1"
TRIGGER_PREFIX = "run_counts_"
KEY_COLUMNS = "benchmark, status, phase_key, checklist_entry"


def _tables() -> tuple[str, str]:
    quote = connection.ops.quote_name
    return quote(EvaluationRun._meta.db_table), quote(RunCount._meta.db_table)


def _trigger_names() -> list[str]:
    return [f"{TRIGGER_PREFIX}{TRIGGER_VERSION}_{op}" for op in ("insert", "update", "delete")]


def _sqlite_add(counts: str, row: str, sign: str) -> str:
    """Add ``sign`` 1 to the key of the run ``row`` (NEW or OLD): its one row, or a new one."""
    key = (
        f"{row}.benchmark, {row}.status, COALESCE({row}.phase_id, 0), "
        f"{row}.checklist_submission_id IS NOT NULL"
    )
    match = (
        f"benchmark = {row}.benchmark AND status = {row}.status "
        f"AND phase_key = COALESCE({row}.phase_id, 0) "
        f"AND checklist_entry = ({row}.checklist_submission_id IS NOT NULL)"
    )
    return (
        f"UPDATE {counts} SET runs = runs {sign} 1 "
        f"WHERE id = (SELECT id FROM {counts} WHERE {match} LIMIT 1); "
        f"INSERT INTO {counts} ({KEY_COLUMNS}, runs) SELECT {key}, {sign}1 "
        f"WHERE NOT EXISTS (SELECT 1 FROM {counts} WHERE {match}); "
    )


# A run's key changed (progress, lease and error updates leave it alone and fire nothing).
_KEY_CHANGED = (
    "OLD.benchmark IS DISTINCT FROM NEW.benchmark OR OLD.status IS DISTINCT FROM NEW.status "
    "OR OLD.phase_id IS DISTINCT FROM NEW.phase_id "
    "OR (OLD.checklist_submission_id IS NULL) <> (NEW.checklist_submission_id IS NULL)"
)


def _sqlite_triggers() -> list[str]:
    runs, counts = _tables()
    insert, update, delete = _trigger_names()
    changed = _KEY_CHANGED.replace("IS DISTINCT FROM", "IS NOT")
    return [
        f"CREATE TRIGGER {insert} AFTER INSERT ON {runs} BEGIN "
        f"{_sqlite_add(counts, 'NEW', '+')}END",
        f"CREATE TRIGGER {update} AFTER UPDATE OF benchmark, status, phase_id, "
        f"checklist_submission_id ON {runs} WHEN {changed} BEGIN "
        f"{_sqlite_add(counts, 'OLD', '-')}{_sqlite_add(counts, 'NEW', '+')}END",
        f"CREATE TRIGGER {delete} AFTER DELETE ON {runs} BEGIN "
        f"{_sqlite_add(counts, 'OLD', '-')}END",
    ]


def _postgresql_triggers() -> list[str]:
    runs, counts = _tables()
    insert, update, delete = _trigger_names()
    key = "benchmark, status, COALESCE(phase_id, 0), checklist_submission_id IS NOT NULL"
    function = f"{TRIGGER_PREFIX}{TRIGGER_VERSION}_change"
    return [
        f"""
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {counts} ({KEY_COLUMNS}, runs)
                SELECT {key}, COUNT(*) FROM new_runs GROUP BY 1, 2, 3, 4;
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO {counts} ({KEY_COLUMNS}, runs)
                SELECT {key}, -COUNT(*) FROM old_runs GROUP BY 1, 2, 3, 4;
            ELSE
                INSERT INTO {counts} ({KEY_COLUMNS}, runs) VALUES
                    (OLD.benchmark, OLD.status, COALESCE(OLD.phase_id, 0),
                     OLD.checklist_submission_id IS NOT NULL, -1),
                    (NEW.benchmark, NEW.status, COALESCE(NEW.phase_id, 0),
                     NEW.checklist_submission_id IS NOT NULL, 1);
            END IF;
            RETURN NULL;
        END
        $$
        """,
        f"CREATE TRIGGER {insert} AFTER INSERT ON {runs} REFERENCING NEW TABLE AS new_runs "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {update} AFTER UPDATE OF benchmark, status, phase_id, "
        f"checklist_submission_id ON {runs} FOR EACH ROW WHEN ({_KEY_CHANGED}) "
        f"EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {delete} AFTER DELETE ON {runs} REFERENCING OLD TABLE AS old_runs "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
    ]


def _installed_triggers() -> set[str]:
    runs = EvaluationRun._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [connection.ops.quote_name(runs)],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                [runs],
            )
        return {name for (name,) in cursor.fetchall() if name.startswith(TRIGGER_PREFIX)}


def run_counts_triggers_missing() -> list[str]:
    """The triggers of this version not installed on the run table (empty when all are)."""
    installed = _installed_triggers()
    return [name for name in _trigger_names() if name not in installed]


@transaction.atomic
def run_counts_install() -> bool:
    """Install the triggers of this version (dropping older ones); True if any was missing.

    Counts made while a trigger was missing are wrong: the caller reconciles.
    """
    if connection.vendor not in ("sqlite", "postgresql"):
        raise NotImplementedError(f"run counts have no triggers for {connection.vendor}")
    installed = _installed_triggers()
    if installed == set(_trigger_names()):
        return False
    runs, _ = _tables()
    with connection.cursor() as cursor:
        for name in sorted(installed):
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER {connection.ops.quote_name(name)} ON {runs}")
            else:
                cursor.execute(f"DROP TRIGGER {connection.ops.quote_name(name)}")
        statements = (
            _postgresql_triggers() if connection.vendor == "postgresql" else _sqlite_triggers()
        )
        for statement in statements:
            cursor.execute(statement)
    return True


@transaction.atomic
def run_counts_fold() -> int:
    """Sum each key's rows into one (dropping keys at 0); returns the rows there were."""
    _, counts = _tables()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement, one snapshot: what it deletes is exactly what it sums.
            cursor.execute(
                f"WITH gone AS (DELETE FROM {counts} RETURNING {KEY_COLUMNS}, runs), "
                f"folded AS (INSERT INTO {counts} ({KEY_COLUMNS}, runs) "
                f"SELECT {KEY_COLUMNS}, SUM(runs) FROM gone GROUP BY 1, 2, 3, 4 "
                f"HAVING SUM(runs) <> 0 RETURNING 1) "
                "SELECT (SELECT COUNT(*) FROM gone)"
            )
            return int(cursor.fetchone()[0])
        # SQLite: the transaction holds the only write lock, so nothing moves in between.
        cursor.execute(f"SELECT COUNT(*), COALESCE(MAX(id), 0) FROM {counts}")
        rows, last = cursor.fetchone()
        if rows <= 1:
            return int(rows)
        cursor.execute(
            f"INSERT INTO {counts} ({KEY_COLUMNS}, runs) "
            f"SELECT {KEY_COLUMNS}, SUM(runs) FROM {counts} WHERE id <= %s "
            "GROUP BY 1, 2, 3, 4 HAVING SUM(runs) <> 0",
            [last],
        )
        cursor.execute(f"DELETE FROM {counts} WHERE id <= %s", [last])
        return int(rows)


@dataclass(frozen=True)
class Reconciled:
    # Some trigger was missing (installed now, unless only checking).
    triggers_missing: bool
    # Keys whose count differed from a fresh count of the runs (corrected, unless checking).
    keys_off: int

    def __str__(self) -> str:
        triggers = "triggers were missing; " if self.triggers_missing else ""
        return f"{triggers}{self.keys_off} run count key(s) off"


@transaction.atomic
def run_counts_reconcile(*, fix: bool = True) -> Reconciled:
    """Install missing triggers and make the counts equal a fresh count of the runs.

    With ``fix=False`` nothing is written: the keys that differ are counted only.
    """
    missing = run_counts_install() if fix else bool(run_counts_triggers_missing())
    runs, counts = _tables()
    difference = (
        f"SELECT {KEY_COLUMNS}, SUM(n) FROM ("
        f"SELECT benchmark, status, COALESCE(phase_id, 0) AS phase_key, "
        "checklist_submission_id IS NOT NULL AS checklist_entry, COUNT(*) AS n "
        f"FROM {runs} GROUP BY 1, 2, 3, 4 "
        f"UNION ALL SELECT {KEY_COLUMNS}, -SUM(runs) FROM {counts} GROUP BY 1, 2, 3, 4"
        ") AS d GROUP BY 1, 2, 3, 4 HAVING SUM(n) <> 0"
    )
    with connection.cursor() as cursor:
        if not fix:
            cursor.execute(f"SELECT COUNT(*) FROM ({difference}) AS off")
            return Reconciled(missing, int(cursor.fetchone()[0]))
        # One statement: the fresh count and the rows' sums are read in one snapshot.
        cursor.execute(f"INSERT INTO {counts} ({KEY_COLUMNS}, runs) {difference}")
        corrected = max(cursor.rowcount, 0)
    run_counts_fold()
    return Reconciled(missing, corrected)


def run_counts_uninstall() -> None:
    """Drop this module's triggers (the migration that removes the table runs this)."""
    runs, _ = _tables()
    with connection.cursor() as cursor:
        for name in sorted(_installed_triggers()):
            quoted = connection.ops.quote_name(name)
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER {quoted} ON {runs}")
            else:
                cursor.execute(f"DROP TRIGGER {quoted}")
