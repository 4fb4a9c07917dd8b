"""The database cache the site shares between processes when it has no Redis.

Django's ``DatabaseCache`` is shared, but its counters are not safe to share: ``incr`` reads
the value, adds and writes it back with a fresh default timeout, so two processes counting at
once lose a count, and a one-hour window shrinks to five minutes at every count. ``add`` over
an expired row reads, then updates, so two processes can both take it. Here both run in one
transaction that locks the row first (``SELECT ... FOR UPDATE`` where the database has it;
SQLite's ``BEGIN IMMEDIATE`` transactions, see ``config.env.database``, already serialise
writers), and ``incr`` keeps the row's expiry.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, models, router, transaction
from django.utils.timezone import now as tz_now


class AtomicDatabaseCache(DatabaseCache):
    """``DatabaseCache`` whose ``incr``/``decr`` and ``add`` hold across processes."""

    # Set by DatabaseCache; django-stubs does not declare them.
    _table: str
    _base_set: Any

    def _locked_row(self, db: str, key: str) -> tuple[str, Any] | None:
        """The row of ``key`` (value, expires), locked until the transaction ends."""
        connection = connections[db]
        quote_name = connection.ops.quote_name
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote_name('value')}, {quote_name('expires')} "
                f"FROM {quote_name(self._table)} WHERE {quote_name('cache_key')} = %s{lock}",
                [key],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        expires = row[1]
        expression = models.Expression(output_field=models.DateTimeField())
        for converter in connection.ops.get_db_converters(
            expression
        ) + expression.get_db_converters(connection):
            expires = converter(expires, expression, connection)
        return row[0], expires

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        made = self.make_and_validate_key(key, version=version)
        db = router.db_for_write(self.cache_model_class)
        with transaction.atomic(using=db):
            self._locked_row(db, made)
            return bool(self._base_set("add", made, value, timeout))

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        made = self.make_and_validate_key(key, version=version)
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        quote_name = connection.ops.quote_name
        with transaction.atomic(using=db):
            row = self._locked_row(db, made)
            if row is None or row[1] < tz_now():
                raise ValueError(f"Key '{key}' not found")
            value = pickle.loads(base64.b64decode(row[0].encode()))
            new_value = value + delta
            encoded = base64.b64encode(pickle.dumps(new_value, self.pickle_protocol))
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {quote_name(self._table)} SET {quote_name('value')} = %s "
                    f"WHERE {quote_name('cache_key')} = %s",
                    [encoded.decode("latin1"), made],
                )
        return int(new_value)

    def decr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        return self.incr(key, -delta, version=version)
