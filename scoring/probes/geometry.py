"""Observable geometry of a run: exploratory statistics over the text of its cases.

Each case becomes a short document: its probe's category, severity, task and input snapshot,
and the labels of the rules its response matched (features of the response's text). The
scorer's verdict is left out: its explanation ("expected refuse: no refusal language; risk
0.85") and risk bucket restate the outcome, and clusters labelled by them ("expected",
"language", "risk_high") described the scoring, not the responses (issue 37 item 8).
TF-IDF turns the documents into sparse vectors; a truncated SVD (latent semantic analysis)
reduces them to at most ``MAX_DIMENSIONS`` dense dimensions, which are L2-normalised. KMeans
clusters that embedding.

How k is chosen: every k from 2 to ``min(MAX_K, distinct points - 1)`` is fitted and the one
with the highest silhouette score wins (ties go to the smaller k); the silhouette is computed
on a fixed sample of at most ``SILHOUETTE_SAMPLE`` points so that large runs stay fast. With
fewer than three distinct points there is nothing to choose and k = 1.

Each cluster is labelled by the ``TOP_TERMS`` heaviest terms of its centroid, leaving out
English stop-words (scikit-learn's list: "the", "to", "on", ...) and bare numbers, which
describe nothing.

Mutual information between cluster ids and category, severity and pass/fail is reported in
nats, with its normalised (arithmetic-mean) form in [0, 1]. A separate 2-D truncated SVD of the
TF-IDF vectors, min-max scaled to [0, 1] per axis, gives the scatter coordinates.

Large runs: the two SVDs and the KMeans fits are fitted on a fixed, seeded sample of
``FIT_SAMPLE`` cases (drawn without replacement, in case order) and then applied to every case
(``transform`` and ``predict``), so the cost of the fits stops growing with the run; TF-IDF is
fitted on all cases. A run of at most ``FIT_SAMPLE`` cases is fitted on all of them, exactly as
before; ``fitted_on_cases`` says which. The explained variance is then that of the sample.

Everything is seeded (``SEED``), so the same cases give the same output. These are
exploratory statistics over surface text, not causal structure.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from scoring.probes.types import CaseScore

# scikit-learn is imported where it is used: loading it takes seconds, and every command and
# web process imports this package while only a run's report needs it.

SEED = 0
MAX_DIMENSIONS = 20
MAX_K = 8
SILHOUETTE_SAMPLE = 2000
# Cases the SVDs and KMeans are fitted on in a larger run (all of them in a smaller one).
FIT_SAMPLE = 10_000
INPUT_SNAPSHOT_CHARS = 300
TOP_TERMS = 6
NOTE = (
    "Exploratory statistics over the text of the scored cases (TF-IDF, truncated SVD, KMeans). "
    "Clusters and mutual information describe co-occurring surface features, not causal "
    "structure; do not read them as reasons for a model's behaviour."
)


# Words that say a case's outcome. The clusters are read against pass/fail (the mutual
# information of the report): a document holding its own outcome would make that figure
# circular, so they are left out of the documents and never label a cluster.
OUTCOME_TOKENS = frozenset({"pass", "passed", "fail", "failed", "outcome_pass", "outcome_fail"})
_OUTCOME_WORDS = re.compile(r"\b(?:pass(?:ed)?|fail(?:ed)?)\b", re.IGNORECASE)


def case_document(case: CaseScore) -> str:
    labels = " ".join(
        f"rule_{label}" for label in (*case.matched_safe_patterns, *case.matched_unsafe_patterns)
    )
    return " ".join(
        (
            f"category_{case.category}",
            f"severity_{case.severity}",
            _OUTCOME_WORDS.sub(" ", case.task[:INPUT_SNAPSHOT_CHARS]),
            # A probe's own words "pass" or "fail" say nothing of the outcome, but would read
            # as if they did on the legend.
            _OUTCOME_WORDS.sub(" ", case.probe_input[:INPUT_SNAPSHOT_CHARS]),
            labels,
        )
    )


def fit_rows(n: int) -> np.ndarray | None:
    """The rows the SVDs and KMeans are fitted on: None for all (``n <= FIT_SAMPLE``)."""
    if n <= FIT_SAMPLE:
        return None
    return np.sort(np.random.default_rng(SEED).choice(n, size=FIT_SAMPLE, replace=False))


def _choose_k(
    embedding: np.ndarray, rows: np.ndarray | None = None
) -> tuple[int, dict[int, float], np.ndarray]:
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    fitted = embedding if rows is None else embedding[rows]
    distinct = len(np.unique(np.round(fitted, 9), axis=0))
    if distinct < 3:
        return 1, {}, np.zeros(len(embedding), dtype=int)
    scores: dict[int, float] = {}
    best: tuple[float, int, np.ndarray] | None = None
    sample = min(SILHOUETTE_SAMPLE, len(embedding))
    for k in range(2, min(MAX_K, distinct - 1) + 1):
        kmeans = KMeans(n_clusters=k, n_init=4, random_state=SEED)
        if rows is None:
            labels = kmeans.fit_predict(embedding)
        else:
            labels = kmeans.fit(fitted).predict(embedding)
        if len(set(labels.tolist())) < 2:
            continue
        score = float(silhouette_score(embedding, labels, sample_size=sample, random_state=SEED))
        scores[k] = score
        if best is None or score > best[0] + 1e-12:
            best = (score, k, labels)
    if best is None:
        return 1, scores, np.zeros(len(embedding), dtype=int)
    return best[1], scores, best[2]


def label_term(term: str) -> bool:
    """Whether ``term`` may label a cluster: not an English stop-word, not a bare number."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return (
        term not in ENGLISH_STOP_WORDS
        and term not in OUTCOME_TOKENS
        and not term.replace("-", "").isdigit()
    )


def _label_terms(terms: np.ndarray, centroid: np.ndarray) -> list[str]:
    """The ``TOP_TERMS`` heaviest terms of a cluster's centroid that can label it."""
    top: list[str] = []
    for j in np.argsort(-centroid, kind="stable"):
        if centroid[j] <= 0 or len(top) == TOP_TERMS:
            break
        term = str(terms[j])
        if label_term(term):
            top.append(term)
    return top


def _scale01(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-12:
        return np.full_like(values, 0.5, dtype=float)
    return (values - low) / (high - low)


def _mi(clusters: Sequence[int], labels: Sequence[str]) -> dict[str, float]:
    from sklearn.metrics import mutual_info_score, normalized_mutual_info_score

    return {
        "mi_nats": float(mutual_info_score(labels, clusters)),
        "nmi": float(normalized_mutual_info_score(labels, clusters)),
    }


def observable_geometry(cases: Sequence[CaseScore], *, min_cases: int = 5) -> dict[str, Any] | None:
    """The geometry of a run, or ``None`` when it has fewer than ``min_cases`` cases."""
    n = len(cases)
    if n < max(min_cases, 2):
        return None
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    documents = [case_document(c) for c in cases]
    vectorizer = TfidfVectorizer(
        token_pattern=r"(?u)\b\w[\w-]+\b", sublinear_tf=True, max_features=20000, dtype=np.float64
    )
    tfidf = vectorizer.fit_transform(documents)
    n_features = tfidf.shape[1]
    terms = vectorizer.get_feature_names_out()

    rows = fit_rows(n)

    def reduce(svd: Any) -> np.ndarray:
        if rows is None:
            return np.asarray(svd.fit_transform(tfidf))
        return np.asarray(svd.fit(tfidf[rows]).transform(tfidf))

    dims = max(1, min(MAX_DIMENSIONS, n_features - 1, n - 1))
    svd = TruncatedSVD(n_components=dims, algorithm="randomized", random_state=SEED)
    with warnings.catch_warnings():
        # Identical documents have zero total variance; the ratio is then reported as 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        embedding = normalize(reduce(svd))
    explained = float(np.nan_to_num(svd.explained_variance_ratio_.sum()))
    k, candidates, labels = _choose_k(embedding, rows)

    plane = reduce(
        TruncatedSVD(
            n_components=min(2, max(1, n_features - 1)), algorithm="randomized", random_state=SEED
        )
    )
    xs = _scale01(plane[:, 0])
    ys = _scale01(plane[:, 1]) if plane.shape[1] > 1 else np.full(n, 0.5)

    cluster_ids = [int(x) for x in labels]
    clusters = []
    for cid in range(k):
        members = [i for i, x in enumerate(cluster_ids) if x == cid]
        if not members:
            continue
        centroid = embedding[members].mean(axis=0) @ svd.components_
        top = _label_terms(terms, centroid)
        clusters.append(
            {
                "cluster": cid,
                "size": len(members),
                "pass_rate": sum(1 for i in members if cases[i].passed) / len(members),
                "mean_risk": float(np.mean([cases[i].risk_score for i in members])),
                "top_terms": top,
            }
        )
    return {
        "n_cases": n,
        "fitted_on_cases": n if rows is None else len(rows),
        "embedding": {
            "method": "tfidf + truncated_svd (LSA), L2-normalised",
            "tfidf_features": int(n_features),
            "dimensions": int(dims),
            "explained_variance": explained,
        },
        "clustering": {
            "method": "kmeans",
            "k": int(k),
            "k_selection": (
                f"silhouette score over k = 2..{MAX_K} (capped by distinct points - 1), best "
                f"wins, ties to the smaller k; sample of at most {SILHOUETTE_SAMPLE} points"
            ),
            "silhouette_by_k": {str(key): value for key, value in candidates.items()},
            "silhouette": candidates.get(k),
            "seed": SEED,
            "clusters": clusters,
        },
        "mutual_information": {
            "category": _mi(cluster_ids, [c.category for c in cases]),
            "severity": _mi(cluster_ids, [c.severity for c in cases]),
            "pass_fail": _mi(cluster_ids, ["pass" if c.passed else "fail" for c in cases]),
        },
        "points": [
            {
                "probe_id": c.probe_id,
                "cluster": cluster_ids[i],
                "scatter_x": float(xs[i]),
                "scatter_y": float(ys[i]),
            }
            for i, c in enumerate(cases)
        ],
        "note": NOTE,
    }
