"""The board's stored buckets (``models.board_sizes.BoardBucket``) as read for one page: running
sums over them, and the rows beyond a threshold's bucket (issue 38), for
:mod:`~benchmarks_app.selectors.board_counts`."""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from typing import Any

import numpy as np


def segment_sums(counts: np.ndarray, starts: Sequence[int]) -> np.ndarray:
    """Running sums of ``counts`` restarted at each of ``starts`` (ascending, from 0)."""
    out = np.asarray(counts, dtype=np.int64).copy()
    ends = [*starts[1:], len(out)]
    for start, end in zip(starts, ends, strict=True):
        out[start:end] = np.cumsum(out[start:end])
    return out


class StoredBuckets:
    """The stored buckets a request's thresholds fall among: their keys (group_a, group_b,
    bucket) in order, the running sums of their entries, and the entries of the buckets
    beyond them all (above the last for ``>``/``>=``, below the first for ``<``/``<=``)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, ...]] = []
        self.below = np.zeros(1, dtype=np.int64)  # below[i]: the entries of keys[:i]
        self.beyond_all = 0

    def add_rows(self, result: Any) -> None:
        rows = json.loads(result) if isinstance(result, str) else result or []
        table = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        table = table[np.lexsort((table[:, 2], table[:, 1], table[:, 0]))]
        self.keys = [tuple(key) for key in table[:, :3].tolist()]
        self.below = np.concatenate([[0], np.cumsum(table[:, 3])])

    def beyond(self, op: str, wanted: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """For each of the ``wanted`` buckets, the entries in the buckets beyond it."""
        keys, below = self.keys, self.below
        if op in (">", ">="):
            return np.asarray(
                [self.beyond_all + below[-1] - below[bisect.bisect_right(keys, w)] for w in wanted]
            )
        return np.asarray([self.beyond_all + below[bisect.bisect_left(keys, w)] for w in wanted])


def listed_counts(result: Any) -> list[int]:
    """The counts of one listed subquery, in the order of its VALUES rows' first column."""
    if isinstance(result, str):  # SQLite: a JSON array of [order, count] pairs
        return [count for _, count in sorted(json.loads(result))]
    return list(result)
