"""How many rows each board has, kept by the database (issue 38).

Every board page and API list counts its board for its pager: a ``COUNT(*)`` over the
board's index, 100,000 entries at 100,000 rows (8-30 ms on PostgreSQL, a third to a half of
a page's database time). These rows hold the number instead, one per board and sort group
(the audit board's complete and incomplete rows, the probe board's ranked and unranked ones
are paged apart), so that a pager's count is one row read whatever the board's size.
Triggers on the three board tables write them (``services.board_sizes``), so that every path
that writes board rows counts (incremental run ends, full rebuilds, cascades, the admin,
bulk seeding). ``BoardRowQuerySet.count`` reads them (``models.common``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db import models


class BoardSize(models.Model):
    """The number of rows of one board (``board`` names the table) in one sort group."""

    board = models.CharField(max_length=10)
    # The columns that pick the board out of its table, whatever the table: the release,
    # suite or challenge id; the judge key or suite version ('' where the board has none).
    key_a = models.BigIntegerField()
    key_b = models.CharField(max_length=300, blank=True, default="")
    phase_key = models.BigIntegerField(default=0)
    # 0 where the table has no sort group (checklist).
    sort_group = models.SmallIntegerField(default=0)
    entries = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # The triggers' upserts land on this key: one row per board and group.
            models.UniqueConstraint(
                fields=["board", "key_a", "key_b", "phase_key", "sort_group"],
                name="uniq_board_size_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.board} {self.key_a}/{self.key_b}/phase {self.phase_key}: {self.entries}"


# A bucket of a measure holds the values v with floor(v * BUCKETS_PER_UNIT) equal to its
# number: exact in binary floating point (a power of two), so that the bucket's bounds
# (number / BUCKETS_PER_UNIT) compare with stored values exactly as the triggers bucket them.
BUCKETS_PER_UNIT = 1024
# Values are clamped to +-BUCKET_LIMIT before bucketing (the order columns hold 1e300 for a
# missing value, whose bucket number would not fit a 64-bit integer): the top bucket holds
# every value from BUCKET_LIMIT up, the bottom one every value below its upper edge.
BUCKET_LIMIT = 2.0**40
TOP_BUCKET = int(BUCKET_LIMIT * BUCKETS_PER_UNIT)
BOTTOM_BUCKET = -TOP_BUCKET


def bucket_of(value: float) -> int:
    """The bucket of ``value``, as the triggers compute it."""
    clamped = min(max(float(value), -BUCKET_LIMIT), BUCKET_LIMIT)
    return math.floor(clamped * BUCKETS_PER_UNIT)


def bucket_edges(bucket: int) -> tuple[float, float]:
    """The values of ``bucket``: from the first (included) to the second (excluded)."""
    low = -math.inf if bucket == BOTTOM_BUCKET else bucket / BUCKETS_PER_UNIT
    high = math.inf if bucket == TOP_BUCKET else (bucket + 1) / BUCKETS_PER_UNIT
    return low, high


class BoardBucket(models.Model):
    """How many rows of one board have a measure (a column the marks count rows by, e.g. the
    span's low end) in one bucket: an order-statistics summary. The rows above a value are the
    buckets above its bucket, summed (a few hundred small rows), plus the rows of its own
    bucket above it (a short index range): a page's best and worst ranks cost no pass over
    the board's index (``selectors.board_counts``)."""

    board = models.CharField(max_length=10)
    key_a = models.BigIntegerField()
    key_b = models.CharField(max_length=300, blank=True, default="")
    phase_key = models.BigIntegerField(default=0)
    # A code of ``SizedBoard.measures``.
    measure = models.SmallIntegerField()
    # The integer columns a measure of the board's order leads with (its sort group, the
    # audit board's repos), 0 where it has none: buckets compare as (group_a, group_b, bucket).
    group_a = models.BigIntegerField(default=0)
    group_b = models.BigIntegerField(default=0)
    bucket = models.BigIntegerField()
    entries = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "board",
                    "key_a",
                    "key_b",
                    "phase_key",
                    "measure",
                    "group_a",
                    "group_b",
                    "bucket",
                ],
                name="uniq_board_bucket_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.board} {self.key_a}/{self.key_b}/{self.phase_key} m{self.measure}"


@dataclass(frozen=True)
class Measure:
    """A column bucketed in :class:`BoardBucket` (rows where it is NULL are left out), over
    all the board's rows or only those whose ``exact`` is true. ``groups``: integer columns
    the buckets are split by first (a board order's leading columns, before its first
    number: the rows before an order key are the buckets before its bucket)."""

    code: int
    column: str
    exact_only: bool = False
    groups: tuple[str, ...] = ()


SPAN_MEASURES = (Measure(1, "span_low"), Measure(2, "span_high"))
ORDER_MEASURE = 5


@dataclass(frozen=True)
class SizedBoard:
    """How a board table's rows map onto :class:`BoardSize`'s key: the attribute names (as
    ``QuerySet.filter`` compares them) behind ``key_a``, ``key_b`` (None: '') and the sort
    group (None: 0), and their database columns (``phase_key`` is read as the phase's id or 0:
    a generated column, which SQLite's triggers do not see)."""

    board: str
    key_a: str
    key_b: str | None
    sort_group: str | None
    measures: tuple[Measure, ...] = SPAN_MEASURES

    def measure(self, column: str, *, exact_only: bool) -> Measure | None:
        for measure in self.measures:
            if measure.code == ORDER_MEASURE:
                continue
            if measure.column == column and measure.exact_only == exact_only:
                return measure
        return None

    def order_measure(self, order: tuple[str, ...]) -> Measure | None:
        """The measure of the board's ``order`` (its leading groups and first number), if
        the board has one."""
        for measure in self.measures:
            if measure.code == ORDER_MEASURE and order[: len(measure.groups) + 1] == (
                *measure.groups,
                measure.column,
            ):
                return measure
        return None

    def filter_names(self) -> tuple[str, ...]:
        """The equalities that pick one whole board out of the table (a pager's filter)."""
        return (self.key_a, *((self.key_b,) if self.key_b else ()), "phase_key")


SIZED_BOARDS: dict[str, SizedBoard] = {
    "benchmarks_app_auditboardrow": SizedBoard(
        "audit",
        "release_id",
        "judge",
        "sort_group",
        (*SPAN_MEASURES, Measure(ORDER_MEASURE, "sort_a", groups=("sort_group", "sort_repos"))),
    ),
    "benchmarks_app_probeboardrow": SizedBoard(
        "probes",
        "suite_id",
        "suite_version",
        "sort_group",
        (*SPAN_MEASURES, Measure(ORDER_MEASURE, "sort_a", groups=("sort_group",))),
    ),
    "benchmarks_app_checklistboardrow": SizedBoard(
        "checklist",
        "challenge_id",
        None,
        None,
        # Against a row whose value is exact, values are compared: over the exact rows, and
        # over every row.
        (
            *SPAN_MEASURES,
            Measure(3, "s", exact_only=True),
            Measure(4, "s"),
            Measure(ORDER_MEASURE, "sort_a"),
        ),
    ),
}
