"""The ``offline`` audit judge: TF-IDF similarity, standardised within the repo; no network.

A truth finding is matched to the scan finding most similar to it (TF-IDF cosine over words
and code identifiers, IDF fitted on the repo's own documents) when that similarity stands far
above the repo's other truth-scan pairs. The threshold is a z-score, not a raw cosine,
because raw cosines are not comparable between repos: findings of one protocol share its
contract and variable names, so a repo's unrelated pairs can be as similar as another repo's
true matches. Thresholds on raw cosines fitted on some repos transferred badly to the others
(leave-one-repo-out Cohen's kappa 0.26 against 0.47 in-sample), thresholds on z-scores
much better (0.46 held out, 0.53 in-sample; ``sample_data/audit/OFFLINE_JUDGE_CALIBRATION.md``).

The z-score of a pair is taken against the repo's *other* pairs, shrunk toward a prior
(the mean and spread of similarities over the calibration repos) by ``prior_weight`` pseudo
pairs, with every similarity above ``clip_sd`` prior deviations counted at that cap: the
baseline should describe unrelated pairs, so neither the pair itself nor the repo's other
true matches may raise it. Without both, a repo with two findings that each match one scan
finding (a 2-by-2 matrix) would see each match drown the other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scoring.audit.judges.prompts import PROMPT_V2, build_user_prompt_v2, clean_truth_text
from scoring.audit.matching import invalid_reason
from scoring.audit.types import MATCH, NONE, PARTIAL, AuditVerdict, ScanItem, TruthItem, neither
from scoring.judges.llm import JudgeCache, Recorder, local_call

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "and",
        "or",
        "for",
        "on",
        "by",
        "is",
        "are",
        "be",
        "this",
        "that",
        "with",
        "as",
        "it",
        "its",
        "from",
        "at",
        "can",
        "which",
        "when",
        "not",
        "no",
        "if",
        "any",
        "all",
        "into",
        "than",
        "then",
        "their",
        "there",
        "these",
        "those",
        "was",
        "were",
        "will",
        "would",
        "could",
        "should",
        "may",
        "might",
        "function",
        "contract",
        "code",
        "issue",
        "user",
        "users",
        "value",
        "values",
    ]
)


def code_identifiers(text: str) -> set[str]:
    """Names that look like code: camelCase, snake_case or followed by ``(``."""
    found = set()
    for m in _IDENT.finditer(text or ""):
        word = m.group(0)
        after = text[m.end() : m.end() + 1]
        if (
            (any(c.isupper() for c in word[1:]) and any(c.islower() for c in word))
            or "_" in word.strip("_")
            or after == "("
        ) and len(word) > 2:
            found.add(word.lower().lstrip("_"))
    return found


def analyze(text: str) -> list[str]:
    """Words plus code identifiers whole and split (``cashIn`` → cashin, cash, in)."""
    tokens: list[str] = []
    for m in _IDENT.finditer(text or ""):
        word = m.group(0)
        lower = word.lower().lstrip("_")
        if len(lower) > 1 and lower not in _STOP:
            tokens.append(lower)
        parts = [p.lower() for p in _CAMEL.findall(word.replace("_", " "))]
        if len(parts) > 1:
            tokens += [p for p in parts if len(p) > 2 and p not in _STOP]
    return tokens


@dataclass(frozen=True)
class OfflineParams:
    """The decision rule, fitted by ``python -m scoring.audit.calibration`` on ``recorded/``.

    With ``standardize`` the thresholds are z-scores (standard deviations above the repo's
    other pairs); without it they are raw blended cosines (the rule before standardising,
    kept so that the calibration can report how it generalises). ``partial >= exact`` means
    the judge never answers partial: that is what the cross-validated fit chose, since the
    recorded verdicts hold 2 partials in 131 findings.
    """

    exact: float = 5.625
    partial: float = 5.625
    ident_weight: float = 0.0
    standardize: bool = True
    # Mean and standard deviation of the blended similarity over all truth-scan pairs of
    # the calibration repos (no labels used), and how many pairs' worth of weight they get.
    prior_mean: float = 0.0586
    prior_std: float = 0.0474
    prior_weight: float = 20.0
    # Similarities above prior_mean + clip_sd * prior_std enter the baseline at that cap
    # (a design constant, not fitted: likely matches must not inflate the baseline).
    clip_sd: float = 4.0

    def label(self, score: float) -> str:
        """MATCH, PARTIAL or NONE for the best score of a batch."""
        if score >= self.exact:
            return MATCH
        if score >= self.partial:
            return PARTIAL
        return NONE

    def describe(self) -> str:
        rule = "z" if self.standardize else "cosine"
        text = f"{rule} exact ≥ {self.exact:g}"
        text += f", partial ≥ {self.partial:g}" if self.partial < self.exact else ", no partial"
        return text + f", identifier weight {self.ident_weight:g}"


def truth_document(truth: TruthItem) -> str:
    return f"{truth.title}\n{truth.title}\n{clean_truth_text(truth.description)}"


def scan_document(s: ScanItem) -> str:
    return f"{s.title}\n{s.title}\n{s.location}\n{s.file}\n{s.description}"


def similarity_matrix(truths: Sequence[TruthItem], scans: Sequence[ScanItem]) -> Any:
    """Cosine similarities (truths by scans) with IDF fitted on the repo's own documents."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    if not truths or not scans:
        return np.zeros((len(truths), len(scans)))
    docs = [*(truth_document(t) for t in truths), *(scan_document(s) for s in scans)]
    vectorizer = TfidfVectorizer(analyzer=analyze, sublinear_tf=True)
    try:
        matrix = vectorizer.fit_transform(docs)
    except ValueError:  # nothing but stop words
        return np.zeros((len(truths), len(scans)))
    return cosine_similarity(matrix[: len(truths)], matrix[len(truths) :])


def truth_identifiers(t: TruthItem) -> set[str]:
    return code_identifiers(t.title + "\n" + clean_truth_text(t.description))


def scan_identifiers(s: ScanItem) -> set[str]:
    return code_identifiers(f"{s.title}\n{s.location}\n{s.description}")


def identifier_matrix(truths: Sequence[TruthItem], scans: Sequence[ScanItem]) -> Any:
    """Overlap of code identifiers, |T ∩ S| / min(|T|, |S|), truths by scans."""
    import numpy as np

    t_ids = [truth_identifiers(t) for t in truths]
    s_ids = [scan_identifiers(s) for s in scans]
    out = np.zeros((len(truths), len(scans)))
    for i, a in enumerate(t_ids):
        for j, b in enumerate(s_ids):
            if a and b:
                out[i, j] = len(a & b) / min(len(a), len(b))
    return out


def blend(cosine: Any, identifiers: Any, ident_weight: float) -> Any:
    if not ident_weight:
        return cosine
    return cosine * (1 - ident_weight) + identifiers * ident_weight


def standardize(blended: Any, params: OfflineParams) -> Any:
    """Each pair's z-score against the other pairs of the matrix, shrunk toward the prior.

    The pair itself is left out of the mean and spread it is compared with, and the others
    enter capped at ``clip_sd`` prior deviations, so true matches do not raise the baseline;
    ``prior_weight`` pseudo pairs with the prior's mean and spread keep a small repo (or a
    lone batch) from being its own yardstick.
    """
    import numpy as np

    m = np.asarray(blended, dtype=float)
    if not params.standardize or m.size == 0:
        return m
    k = params.prior_weight
    n = m.size - 1 + k
    w = np.minimum(m, params.prior_mean + params.clip_sd * params.prior_std)
    total = w.sum() - w + k * params.prior_mean
    squares = (w * w).sum() - w * w + k * (params.prior_std**2 + params.prior_mean**2)
    mean = total / n
    spread = np.sqrt(np.maximum(squares / n - mean * mean, 1e-12))
    return (m - mean) / spread


class OfflineAuditJudge:
    """Deterministic TF-IDF similarity, standardised within the repo; no network.

    ``register(repo, truths, scans)`` fits the IDF and the z-scores on that repo's truth and
    scan documents, so a verdict depends only on the repo's data, never on how the pool was
    batched. An unregistered truth finding is scored against its batch alone (the prior then
    carries most of the baseline).
    """

    name = "offline"

    def __init__(
        self,
        *,
        params: OfflineParams | None = None,
        cache: JudgeCache | None = None,
        record: Recorder | None = None,
    ) -> None:
        self.params = params or OfflineParams()
        p = self.params
        rule = "z" if p.standardize else "cos"
        self.model = (
            f"tfidf-{rule}(exact={p.exact},partial={p.partial},ident={p.ident_weight},"
            f"prior={p.prior_mean}/{p.prior_std}x{p.prior_weight},clip={p.clip_sd})"
        )
        self.cache = cache
        self.record = record
        # truth key → (fingerprint of the repo's documents, {scan index: (similarity, score)})
        self._scores: dict[Any, tuple[str, dict[int, tuple[float, float]]]] = {}

    def register(
        self, repo: str, truths: Sequence[TruthItem], scans: Sequence[ScanItem] = ()
    ) -> None:
        cosine = similarity_matrix(truths, scans)
        idents = identifier_matrix(truths, scans) if self.params.ident_weight else cosine
        self.register_matrices(repo, truths, scans, cosine, idents)

    def register_matrices(
        self,
        repo: str,
        truths: Sequence[TruthItem],
        scans: Sequence[ScanItem],
        cosine: Any,
        identifiers: Any,
    ) -> None:
        """Register precomputed similarities (the calibration computes them once)."""
        blended = blend(cosine, identifiers, self.params.ident_weight)
        scores = standardize(blended, self.params)
        fingerprint = hashlib.sha256(
            json.dumps(
                [repo, [truth_document(t) for t in truths], [scan_document(s) for s in scans]]
            ).encode()
        ).hexdigest()[:16]
        for i, t in enumerate(truths):
            self._scores[t.key] = (
                fingerprint,
                {s.index: (float(blended[i][j]), float(scores[i][j])) for j, s in enumerate(scans)},
            )

    def scores(self, truth: TruthItem, batch: Sequence[ScanItem]) -> list[tuple[float, float]]:
        """(similarity, decision score) per scan finding of the batch."""
        registered = self._scores.get(truth.key)
        if registered is not None and all(s.index in registered[1] for s in batch):
            return [registered[1][s.index] for s in batch]
        cosine = similarity_matrix([truth], batch)
        idents = identifier_matrix([truth], batch) if self.params.ident_weight else cosine
        blended = blend(cosine, idents, self.params.ident_weight)
        scores = standardize(blended, self.params)
        return [(float(blended[0][j]), float(scores[0][j])) for j in range(len(batch))]

    def decide(self, truth: TruthItem, batch: Sequence[ScanItem]) -> AuditVerdict:
        if not batch:
            return neither(truth_severity=truth.severity)
        pairs = self.scores(truth, batch)
        best = max(range(len(batch)), key=lambda i: (pairs[i][1], -i))
        (similarity, score), chosen = pairs[best], batch[best]
        label = self.params.label(score)
        standing = (
            f", {score:.1f} standard deviations above the repo's other pairs"
            if self.params.standardize
            else ""
        )
        if label == NONE:
            return neither(
                f"Best similarity {similarity:.3f} (finding {chosen.index}{standing}) is below "
                f"the threshold ({self.params.describe()}).",
                truth.severity,
            )
        return AuditVerdict(
            is_match=label == MATCH,
            is_partial_match=label == PARTIAL,
            explanation=f"TF-IDF similarity {similarity:.3f}{standing} with finding "
            f"{chosen.index}.",
            severity_from_junior_auditor=chosen.severity,
            severity_from_truth=truth.severity,
            index_of_finding_from_junior_auditor=chosen.index,
        )

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        corpus = self._scores.get(truth.key, ("batch-only", {}))[0]
        return await local_call(
            judge_name=self.name,
            model=self.model,
            prompt_version=PROMPT_V2,
            prompt_text=f"corpus {corpus}\n{build_user_prompt_v2(truth, batch)}",
            vote_number=vote_number,
            compute=lambda: self.decide(truth, batch),
            schema=AuditVerdict,
            cache=self.cache,
            record=self.record,
            validate=lambda v: invalid_reason(v, batch),
        )
