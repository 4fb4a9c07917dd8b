"""A judge's agreement with curated verdicts: accuracy and Cohen's kappa with bootstrap intervals.

Each comparison is one item (a truth finding against one scan result, one probe response...) with
the judge's label and the curated (correct) label, over a fixed set of classes. Accuracy is the
share of items where they are equal; Cohen's kappa is ``(p_o - p_e) / (1 - p_e)`` with ``p_e``
the agreement expected from the two sides' marginal frequencies. Where ``p_e == 1`` (both sides
give one and the same class everywhere) kappa is undefined and reported as None: agreement on a
single class says nothing about telling classes apart.

Intervals: percentile bootstrap over items (:mod:`scoring.stats.bootstrap`), each item's cell of
the confusion matrix a summed column, so both figures come from the same seeded resamples.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Interval,
    bootstrap_sums_interval,
)


@dataclass(frozen=True)
class Agreement:
    """Agreement of one judge with the curated verdicts over ``n`` items."""

    n: int
    classes: tuple[str, ...]
    accuracy: float | None
    kappa: float | None
    accuracy_ci: Interval | None = None
    kappa_ci: Interval | None = None
    # confusion[curated][judge] = items
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "classes": list(self.classes),
            "accuracy": self.accuracy,
            "accuracy_ci": self.accuracy_ci.as_dict() if self.accuracy_ci else None,
            "kappa": self.kappa,
            "kappa_ci": self.kappa_ci.as_dict() if self.kappa_ci else None,
            "confusion": self.confusion,
        }


def _kappa_from_cells(cells: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """Kappa of each row of flattened ``k x k`` confusion counts (rows: curated, columns: judge)."""
    m = cells.reshape(-1, k, k)
    n = m.sum(axis=(1, 2))
    diag = np.trace(m, axis1=1, axis2=2)
    curated = m.sum(axis=2)
    judged = m.sum(axis=1)
    out = np.full(n.shape, np.nan)
    ok = n > 0
    p_o = np.divide(diag, n, out=np.zeros_like(diag), where=ok)
    p_e = np.divide((curated * judged).sum(axis=1), n * n, out=np.ones_like(n), where=ok)
    defined = ok & (p_e < 1.0)
    np.divide(p_o - p_e, 1.0 - p_e, out=out, where=defined)
    return out


def _accuracy_from_cells(cells: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    m = cells.reshape(-1, k, k)
    n = m.sum(axis=(1, 2))
    out = np.full(n.shape, np.nan)
    np.divide(np.trace(m, axis1=1, axis2=2), n, out=out, where=n > 0)
    return out


def agreement(
    pairs: Iterable[tuple[str, str]],
    *,
    classes: Sequence[str],
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Agreement:
    """Agreement over ``(judge_label, curated_label)`` pairs whose labels are in ``classes``.

    Raises ValueError naming the label that is not one of ``classes`` (a pair is never dropped
    silently). No pair gives ``n == 0`` and no figures.
    """
    order = tuple(classes)
    if len(set(order)) != len(order) or not order:
        raise ValueError(f"classes: must be distinct and not empty, got {list(order)}")
    index = {c: i for i, c in enumerate(order)}
    k = len(order)
    flat: list[int] = []
    for judged, curated in pairs:
        for name, label in (("judge label", judged), ("curated label", curated)):
            if label not in index:
                raise ValueError(f"{name}: {label!r} is not one of {list(order)}")
        flat.append(index[curated] * k + index[judged])
    n = len(flat)
    confusion = {c: dict.fromkeys(order, 0) for c in order}
    if n == 0:
        return Agreement(n=0, classes=order, accuracy=None, kappa=None, confusion=confusion)
    cells = np.zeros((n, k * k), dtype=np.float64)
    cells[np.arange(n), flat] = 1.0
    totals = cells.sum(axis=0, keepdims=True)
    for cell in range(k * k):
        confusion[order[cell // k]][order[cell % k]] = int(totals[0, cell])
    accuracy = float(_accuracy_from_cells(totals, k)[0])
    kappa_value = float(_kappa_from_cells(totals, k)[0])
    kappa = None if np.isnan(kappa_value) else kappa_value
    acc_ci = bootstrap_sums_interval(
        cells,
        lambda sums: _accuracy_from_cells(sums, k),
        resamples=resamples,
        level=level,
        seed=seed,
    )
    kappa_ci = (
        bootstrap_sums_interval(
            cells,
            lambda sums: _kappa_from_cells(sums, k),
            resamples=resamples,
            level=level,
            seed=seed,
        )
        if kappa is not None
        else None
    )
    return Agreement(
        n=n,
        classes=order,
        accuracy=accuracy,
        kappa=kappa,
        accuracy_ci=acc_ci,
        kappa_ci=kappa_ci,
        confusion=confusion,
    )
