from __future__ import annotations

from typing import Any

from django import forms
from django.db import connections, models
from django.db.models.functions import Coalesce

from scoring.text import normalize_line_ends


class LineEndsFormField(forms.CharField):
    """A form's text with its line ends normalized, so a textarea's ``\\r\\n`` is no change."""

    def to_python(self, value: Any) -> Any:
        return normalize_line_ends(super().to_python(value))


class _LineEndsMixin:
    """Model text whose line ends are normalized on every path that stores it: forms and
    the admin (the form field), the API, services and imports (``pre_save``), and queryset
    updates (``get_prep_value``)."""

    def to_python(self, value: Any) -> Any:
        return normalize_line_ends(super().to_python(value))  # type: ignore[misc]

    def get_prep_value(self, value: Any) -> Any:
        return normalize_line_ends(super().get_prep_value(value))  # type: ignore[misc]

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = super().pre_save(model_instance, add)  # type: ignore[misc]
        normalized = normalize_line_ends(value)
        if normalized is not value:
            # The instance holds what the database holds (hashes and prompts read it).
            setattr(model_instance, self.attname, normalized)  # type: ignore[attr-defined]
        return normalized

    def formfield(self, **kwargs: Any) -> Any:
        return super().formfield(**{"form_class": LineEndsFormField, **kwargs})  # type: ignore[misc]


class LineEndsTextField(_LineEndsMixin, models.TextField):  # type: ignore[misc]
    pass


class LineEndsCharField(_LineEndsMixin, models.CharField):  # type: ignore[misc]
    pass


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class EntryMetadata(models.Model):
    """What a participant says about the method behind an entry (shown on boards)."""

    method_name = models.CharField(max_length=100, blank=True)
    method_description = LineEndsCharField(max_length=500, blank=True)
    method_url = models.URLField(max_length=500, blank=True)

    class Meta:
        abstract = True


class AppendOnlyError(RuntimeError):
    """A stored result row was about to be changed: results are appended, never overwritten."""


class AppendOnlyModel(models.Model):
    """Result rows: written once so that any leaderboard can be reproduced from them."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only")
        super().save(*args, **kwargs)


class Severity(models.TextChoices):
    """Normalized audit severities."""

    HIGH = "High", "High"
    MEDIUM = "Medium", "Medium"
    LOW = "Low", "Low"
    INFO = "Info", "Info"
    BEST_PRACTICES = "Best Practices", "Best Practices"


QA_SEVERITIES = (Severity.INFO, Severity.BEST_PRACTICES)


def phase_key_of(phase: Any) -> int:
    """A board's phase (a ``Phase``, its id, or None for the board of all entries) as its
    rows' ``phase_key``."""
    if phase is None:
        return 0
    return int(getattr(phase, "pk", phase))


def phase_key_field() -> models.GeneratedField:
    """The board row's phase as a value that is never NULL: the phase's id, 0 on the board of
    all entries. A board is picked out by equalities on its indexes' leading columns, which
    PostgreSQL needs in order to read an index in order or start a scan at a row-value
    bound: behind ``phase_id IS NULL`` it sorted the whole board for a page, and counted a
    slice of it from the board's first row (1,628 buffers against 3 at 100,000 rows)."""
    return models.GeneratedField(
        expression=Coalesce("phase", models.Value(0)),
        output_field=models.BigIntegerField(),
        db_persist=True,
    )


class BoardRowQuerySet(models.QuerySet[Any]):
    def on_phase(self, phase: Any) -> BoardRowQuerySet:
        """The rows of the boards of ``phase`` (None: the boards of all entries)."""
        return self.filter(phase_key=phase_key_of(phase))

    def count(self) -> int:
        """The rows' number; for one whole board (or one sort group of it), the stored size
        (``models.board_sizes``) instead of a ``COUNT(*)`` over its index: every board page's
        pager counts its board, 8-30 ms at 100,000 rows on PostgreSQL, one row read here."""
        if self._result_cache is None:
            kept = self.kept_size()
            if kept is not None:
                return kept
        return super().count()

    def kept_size(self) -> int | None:
        """The stored size of the rows this queryset filters, where its filter is exactly one
        board's equalities (and maybe its sort group's); None otherwise (any other filter,
        a slice, DISTINCT, grouping: the caller counts)."""
        from benchmarks_app.models.board_sizes import SIZED_BOARDS, BoardSize

        sized = SIZED_BOARDS.get(self.model._meta.db_table)
        equal = _equalities(self.query, self.model._meta.db_table)
        if sized is None or equal is None:
            return None
        names = set(sized.filter_names())
        if set(equal) - names not in (set(), {sized.sort_group}) or not names <= set(equal):
            return None
        key = [sized.board, equal[sized.key_a], equal[sized.key_b] if sized.key_b else ""]
        key.append(equal["phase_key"])
        group = ""
        if sized.sort_group in equal:
            group = " AND sort_group = %s"
            key.append(equal[sized.sort_group])
        # Raw SQL: the ORM's aggregate cost as much CPU as the read (1 ms a page).
        connection = connections[self.db]
        table = connection.ops.quote_name(BoardSize._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT COALESCE(SUM(entries), 0) FROM {table} WHERE board = %s AND key_a = %s "
                f"AND key_b = %s AND phase_key = %s{group}",
                key,
            )
            return int(cursor.fetchone()[0])


def _equalities(query: Any, table: str) -> dict[str, Any] | None:
    """A query's filter as {column attname: value} when it is only ANDed equalities to plain
    values on the table's own columns, and the query reads plain rows (no slice, DISTINCT,
    grouping, set operation or aggregate); None otherwise."""
    from django.db.models.expressions import Col
    from django.db.models.lookups import Exact
    from django.db.models.sql.where import AND

    if query.is_sliced or query.distinct or query.combinator or query.group_by is not None:
        return None
    if any(getattr(a, "contains_aggregate", False) for a in query.annotations.values()):
        return None
    where = query.where
    if where.negated or where.connector != AND:
        return None
    equal: dict[str, Any] = {}
    for child in where.children:
        if not isinstance(child, Exact) or not isinstance(child.lhs, Col):
            return None
        if child.lhs.alias != table or hasattr(child.rhs, "resolve_expression"):
            return None
        if child.rhs is None:
            return None
        name = child.lhs.target.attname
        value = getattr(child.rhs, "pk", child.rhs)
        if name in equal and equal[name] != value:
            return None
        equal[name] = value
    return equal
