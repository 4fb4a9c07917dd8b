"""The board sizes (``BoardSize``) and order-statistics buckets (``BoardBucket``): kept exact
by database triggers, reconciled here.

Why triggers (as for the run counts, ``services.run_counts``): board rows are written by run
ends, full rebuilds, phase and release changes, cascades from a scanner, suite, team or phase,
the admin, and ``bulk_create`` in imports and benches. A trigger sees every write inside the
writing transaction, so a size commits or rolls back with the rows it counts.

* **SQLite**: row triggers upsert the key's one row (``ON CONFLICT ... DO UPDATE``), and the
  row's bucket of each measure (``models.board_sizes``); an update fires them only when it
  changes a key or a measured column.
* **PostgreSQL**: statement triggers with transition tables upsert each key a statement
  touched once, with the statement's net change (a rebuild's delete of 100,000 rows is one
  grouped upsert; an update that moves no row between boards writes nothing). Keys are
  upserted in key order, so two statements never take two counters in opposite orders.
  Unlike the run counts, a board's counter is one row that writers update: every path that
  writes a board already serialises on the board (a run end locks its release, suite or
  challenge), so the counter adds no wait there.
* :func:`board_sizes_reconcile` installs missing triggers and rewrites the sizes from a fresh
  count of the rows. ``post_migrate`` runs it: SQLite drops a table's triggers when a
  migration rebuilds the table, a database's rows may predate the triggers, and a test
  database's flush (``DELETE FROM`` on SQLite fires the triggers, in no fixed order of tables)
  leaves the sizes off.
"""

from __future__ import annotations

from django.db import connection, transaction

from benchmarks_app.models import BoardBucket, BoardSize
from benchmarks_app.models.board_sizes import (
    BUCKET_LIMIT,
    BUCKETS_PER_UNIT,
    SIZED_BOARDS,
    Measure,
    SizedBoard,
)

TRIGGER_VERSION = "v1"
TRIGGER_PREFIX = "board_sizes_"
KEY_COLUMNS = "board, key_a, key_b, phase_key, sort_group"
BUCKET_COLUMNS = "board, key_a, key_b, phase_key, measure, group_a, group_b, bucket"


def _sizes() -> str:
    return connection.ops.quote_name(BoardSize._meta.db_table)


def _buckets() -> str:
    return connection.ops.quote_name(BoardBucket._meta.db_table)


def _bucket_sql(value: str) -> str:
    """floor(value * BUCKETS_PER_UNIT) as an integer, the value clamped to +-BUCKET_LIMIT first,
    as ``models.board_sizes.bucket_of`` (SQLite has no floor() everywhere: CAST truncates
    toward zero)."""
    limit = repr(BUCKET_LIMIT)
    if connection.vendor == "postgresql":
        clamped = f"LEAST(GREATEST({value}, -{limit}), {limit})"
        return f"CAST(floor({clamped} * {BUCKETS_PER_UNIT}.0) AS bigint)"
    scaled = f"(MIN(MAX({value}, -{limit}), {limit}) * {BUCKETS_PER_UNIT}.0)"
    whole = f"CAST({scaled} AS INTEGER)"
    return f"(CASE WHEN {scaled} >= 0 OR {whole} = {scaled} THEN {whole} ELSE {whole} - 1 END)"


def _measured(sized: SizedBoard, measure: Measure, row: str, sign: str) -> str:
    """SELECT of the bucket change of the board row ``row`` for ``measure``, if it counts."""
    column = f"{row}.{measure.column}"
    condition = f"{column} IS NOT NULL" + (f" AND {row}.exact" if measure.exact_only else "")
    board = ", ".join(
        f"{part} AS {name}" for part, name in zip(_key_parts(sized, row)[:4], _NAMES, strict=False)
    )
    groups = [f"{row}.{name}" for name in measure.groups] + ["0", "0"]
    return (
        f"SELECT {board}, {measure.code} AS measure, {groups[0]} AS group_a, "
        f"{groups[1]} AS group_b, {_bucket_sql(column)} AS bucket, {sign}1 AS n "
        f"WHERE {condition}"
    )


def _key_parts(sized: SizedBoard, row: str) -> list[str]:
    """The ``BoardSize`` key of the board row ``row`` (a table alias, NEW or OLD), a value
    per column of ``KEY_COLUMNS``."""
    return [
        f"'{sized.board}'",
        f"{row}.{sized.key_a}",
        f"{row}.{sized.key_b}" if sized.key_b else "''",
        f"COALESCE({row}.phase_id, 0)",
        f"{row}.{sized.sort_group}" if sized.sort_group else "0",
    ]


def _key(sized: SizedBoard, row: str, *, named: bool = False) -> str:
    parts = _key_parts(sized, row)
    if named:
        parts = [f"{part} AS {name}" for part, name in zip(parts, _NAMES, strict=True)]
    return ", ".join(parts)


_NAMES = [name.strip() for name in KEY_COLUMNS.split(",")]


def _key_columns(sized: SizedBoard) -> list[str]:
    return [sized.key_a, *(c for c in (sized.key_b, sized.sort_group) if c), "phase_id"]


def _trigger_names(table: str) -> list[str]:
    board = SIZED_BOARDS[table].board
    return [f"{TRIGGER_PREFIX}{TRIGGER_VERSION}_{board}_{op}" for op in ("ins", "upd", "del")]


_UPSERT = "ON CONFLICT ({keys}) DO UPDATE SET entries = {sizes}.entries + excluded.entries"


def _sqlite_add(sized: SizedBoard, row: str, sign: str) -> str:
    upsert = _UPSERT.format(keys=KEY_COLUMNS, sizes=_sizes())
    return (
        f"INSERT INTO {_sizes()} ({KEY_COLUMNS}, entries) "
        f"VALUES ({_key(sized, row)}, {sign}1) {upsert}; "
    )


def _sqlite_add_buckets(sized: SizedBoard, row: str, sign: str) -> str:
    upsert = _UPSERT.format(keys=BUCKET_COLUMNS, sizes=_buckets())
    return "".join(
        f"INSERT INTO {_buckets()} ({BUCKET_COLUMNS}, entries) "
        f"{_measured(sized, measure, row, sign)} {upsert}; "
        for measure in sized.measures
    )


def _measure_columns(sized: SizedBoard) -> list[str]:
    columns = {m.column for m in sized.measures} | {g for m in sized.measures for g in m.groups}
    if any(m.exact_only for m in sized.measures):
        columns.add("exact")
    return sorted(columns)


def _sqlite_triggers(table: str) -> list[str]:
    sized = SIZED_BOARDS[table]
    insert, update, delete = _trigger_names(table)
    quoted = connection.ops.quote_name(table)
    columns = list(dict.fromkeys([*_key_columns(sized), *_measure_columns(sized)]))
    changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)

    def add(row: str, sign: str) -> str:
        return _sqlite_add(sized, row, sign) + _sqlite_add_buckets(sized, row, sign)

    return [
        f"CREATE TRIGGER {insert} AFTER INSERT ON {quoted} BEGIN {add('NEW', '+')}END",
        # Only updates of a key or a measured column (a run end's own row, a move between
        # boards); an update of the ties or the paired ranks fires nothing.
        f"CREATE TRIGGER {update} AFTER UPDATE OF {', '.join(columns)} ON {quoted} "
        f"WHEN {changed} BEGIN {add('OLD', '-')}{add('NEW', '+')}END",
        f"CREATE TRIGGER {delete} AFTER DELETE ON {quoted} BEGIN {add('OLD', '-')}END",
    ]


def _postgresql_triggers(table: str) -> list[str]:
    sized = SIZED_BOARDS[table]
    insert, update, delete = _trigger_names(table)
    quoted = connection.ops.quote_name(table)
    function = f"{TRIGGER_PREFIX}{TRIGGER_VERSION}_{sized.board}_change"
    upsert = _UPSERT.format(keys=KEY_COLUMNS, sizes=_sizes())

    def net(changes: str) -> str:
        return (
            f"INSERT INTO {_sizes()} ({KEY_COLUMNS}, entries) "
            f"SELECT {KEY_COLUMNS}, SUM(n) FROM ({changes}) AS c "
            f"GROUP BY {KEY_COLUMNS} HAVING SUM(n) <> 0 ORDER BY {KEY_COLUMNS} {upsert};"
        )

    def keyed(transition: str, sign: str) -> str:
        return f"SELECT {_key(sized, 'r', named=True)}, {sign}1 AS n FROM {transition} AS r"

    bucket_upsert = _UPSERT.format(keys=BUCKET_COLUMNS, sizes=_buckets())

    def measured(transition: str, sign: str) -> str:
        return " UNION ALL ".join(
            _measured(sized, measure, "r", sign).replace(
                " WHERE ", f" FROM {transition} AS r WHERE "
            )
            for measure in sized.measures
        )

    def net_buckets(changes: str) -> str:
        return (
            f"INSERT INTO {_buckets()} ({BUCKET_COLUMNS}, entries) "
            f"SELECT {BUCKET_COLUMNS}, SUM(n) FROM ({changes}) AS c "
            f"GROUP BY {BUCKET_COLUMNS} HAVING SUM(n) <> 0 ORDER BY {BUCKET_COLUMNS} "
            f"{bucket_upsert};"
        )

    return [
        f"""
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                {net(keyed("new_rows", "+"))}
                {net_buckets(measured("new_rows", "+"))}
            ELSIF TG_OP = 'DELETE' THEN
                {net(keyed("old_rows", "-"))}
                {net_buckets(measured("old_rows", "-"))}
            ELSE
                {net(f"{keyed('old_rows', '-')} UNION ALL {keyed('new_rows', '+')}")}
                {net_buckets(f"{measured('old_rows', '-')} UNION ALL {measured('new_rows', '+')}")}
            END IF;
            RETURN NULL;
        END
        $$
        """,
        f"CREATE TRIGGER {insert} AFTER INSERT ON {quoted} REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        # Transition tables cannot go with a column list: every UPDATE statement runs it, and
        # one that moves no row between boards nets to nothing and writes nothing.
        f"CREATE TRIGGER {update} AFTER UPDATE ON {quoted} "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {delete} AFTER DELETE ON {quoted} REFERENCING OLD TABLE AS old_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
    ]


def _installed_triggers(table: str) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [connection.ops.quote_name(table)],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                [table],
            )
        return {name for (name,) in cursor.fetchall() if name.startswith(TRIGGER_PREFIX)}


def board_sizes_triggers_missing() -> list[str]:
    """The triggers of this version not installed on the board tables (empty when all are)."""
    missing = []
    for table in SIZED_BOARDS:
        installed = _installed_triggers(table)
        missing += [name for name in _trigger_names(table) if name not in installed]
    return missing


def _drop(table: str, names: set[str]) -> None:
    with connection.cursor() as cursor:
        for name in sorted(names):
            quoted = connection.ops.quote_name(name)
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER {quoted} ON {connection.ops.quote_name(table)}")
            else:
                cursor.execute(f"DROP TRIGGER {quoted}")


@transaction.atomic
def board_sizes_install() -> bool:
    """Install the triggers of this version (dropping older ones); True if any was missing.

    Sizes changed while a trigger was missing are wrong: the caller reconciles.
    """
    if connection.vendor not in ("sqlite", "postgresql"):
        raise NotImplementedError(f"board sizes have no triggers for {connection.vendor}")
    any_missing = False
    for table in SIZED_BOARDS:
        installed = _installed_triggers(table)
        if installed == set(_trigger_names(table)):
            continue
        any_missing = True
        _drop(table, installed)
        statements = (
            _postgresql_triggers(table)
            if connection.vendor == "postgresql"
            else _sqlite_triggers(table)
        )
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    return any_missing


def _fresh_counts() -> str:
    """Every board's and group's rows, counted from the board tables."""
    parts = []
    for table, sized in SIZED_BOARDS.items():
        parts.append(
            f"SELECT {_key(sized, 't', named=True)}, COUNT(*) AS n "
            f"FROM {connection.ops.quote_name(table)} AS t "
            "GROUP BY 2, 3, 4, 5"
        )
    return " UNION ALL ".join(parts)


def _fresh_buckets() -> str:
    """Every board's buckets, counted from the board tables."""
    parts = []
    for table, sized in SIZED_BOARDS.items():
        quoted = connection.ops.quote_name(table)
        for measure in sized.measures:
            select = _measured(sized, measure, "t", "+").replace(
                " WHERE ", f" FROM {quoted} AS t WHERE "
            )
            parts.append(select)
    return " UNION ALL ".join(parts)


def _reconcile(table: str, columns: str, fresh: str, fix: bool) -> int:
    difference = (
        f"SELECT {columns}, SUM(n) FROM ("
        f"SELECT {columns}, n FROM ({fresh}) AS f "
        f"UNION ALL SELECT {columns}, -entries FROM {table}"
        f") AS d GROUP BY {columns} HAVING SUM(n) <> 0"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({difference}) AS off")
        off = int(cursor.fetchone()[0])
        if fix and off:
            # In this transaction: the fresh count replaces every row.
            cursor.execute(f"DELETE FROM {table}")
            cursor.execute(
                f"INSERT INTO {table} ({columns}, entries) "
                f"SELECT {columns}, SUM(n) FROM ({fresh}) AS f "
                f"GROUP BY {columns}"
            )
    return off


@transaction.atomic
def board_sizes_reconcile(*, fix: bool = True) -> int:
    """Install missing triggers and make the sizes and buckets equal a fresh count of the
    board rows; returns the number of keys that were off (with ``fix=False``, only counts
    them)."""
    if fix:
        board_sizes_install()
    return _reconcile(_sizes(), KEY_COLUMNS, _fresh_counts(), fix) + _reconcile(
        _buckets(), BUCKET_COLUMNS, _fresh_buckets(), fix
    )


def board_sizes_uninstall() -> None:
    """Drop this module's triggers."""
    for table in SIZED_BOARDS:
        _drop(table, _installed_triggers(table))
