"""The ``offline`` audit judge: TF-IDF similarity over words and code identifiers, no network."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scoring.audit.judges.prompts import PROMPT_VERSION, build_user_prompt, clean_truth_text
from scoring.audit.matching import invalid_reason
from scoring.audit.types import AuditVerdict, ScanItem, TruthItem, neither
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
    """Thresholds calibrated on ``recorded/`` (see OFFLINE_JUDGE_CALIBRATION.md)."""

    exact: float = 0.40
    partial: float = 0.35
    ident_weight: float = 0.20


def truth_document(truth: TruthItem) -> str:
    return f"{truth.title}\n{truth.title}\n{clean_truth_text(truth.description)}"


def scan_document(s: ScanItem) -> str:
    return f"{s.title}\n{s.title}\n{s.location}\n{s.file}\n{s.description}"


def _offline_score(sim: float, t_ids: set[str], s_ids: set[str], params: OfflineParams) -> float:
    overlap = len(t_ids & s_ids) / min(len(t_ids), len(s_ids)) if t_ids and s_ids else 0.0
    return sim * (1 - params.ident_weight) + overlap * params.ident_weight


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


class OfflineAuditJudge:
    """Deterministic TF-IDF similarity over words and code identifiers; no network.

    ``register(repo, truths, scans)`` fits the IDF on that repo's truth and scan documents,
    so a verdict depends only on the repo's data, never on how the pool was batched. An
    unregistered truth finding is scored against its batch alone.
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
        self.model = f"tfidf(exact={p.exact},partial={p.partial},ident={p.ident_weight})"
        self.cache = cache
        self.record = record
        # truth key → (fingerprint of the repo's documents, {scan index: similarity})
        self._sims: dict[Any, tuple[str, dict[int, float]]] = {}

    def register(
        self, repo: str, truths: Sequence[TruthItem], scans: Sequence[ScanItem] = ()
    ) -> None:
        matrix = similarity_matrix(truths, scans)
        fingerprint = hashlib.sha256(
            json.dumps(
                [repo, [truth_document(t) for t in truths], [scan_document(s) for s in scans]]
            ).encode()
        ).hexdigest()[:16]
        for i, t in enumerate(truths):
            self._sims[t.key] = (
                fingerprint,
                {s.index: float(matrix[i][j]) for j, s in enumerate(scans)},
            )

    def scores(self, truth: TruthItem, batch: Sequence[ScanItem]) -> list[float]:
        registered = self._sims.get(truth.key)
        if registered is not None and all(s.index in registered[1] for s in batch):
            sims = [registered[1][s.index] for s in batch]
        else:
            sims = [float(x) for x in similarity_matrix([truth], batch)[0]]
        t_ids = truth_identifiers(truth)
        return [
            _offline_score(sim, t_ids, scan_identifiers(s), self.params)
            for s, sim in zip(batch, sims, strict=True)
        ]

    def decide(self, truth: TruthItem, batch: Sequence[ScanItem]) -> AuditVerdict:
        if not batch:
            return neither(truth_severity=truth.severity)
        scores = self.scores(truth, batch)
        best = max(range(len(batch)), key=lambda i: (scores[i], -i))
        score, chosen = scores[best], batch[best]
        is_match = score >= self.params.exact
        is_partial = not is_match and score >= self.params.partial
        if not (is_match or is_partial):
            return neither(
                f"Best similarity {score:.3f} (finding {chosen.index}) is below "
                f"{self.params.partial}.",
                truth.severity,
            )
        return AuditVerdict(
            is_match=is_match,
            is_partial_match=is_partial,
            explanation=f"TF-IDF similarity {score:.3f} with finding {chosen.index}.",
            severity_from_junior_auditor=chosen.severity,
            severity_from_truth=truth.severity,
            index_of_finding_from_junior_auditor=chosen.index,
        )

    async def judge(
        self, truth: TruthItem, batch: Sequence[ScanItem], *, vote_number: int
    ) -> AuditVerdict:
        corpus = self._sims.get(truth.key, ("batch-only", {}))[0]
        return await local_call(
            judge_name=self.name,
            model=self.model,
            prompt_version=PROMPT_VERSION,
            prompt_text=f"corpus {corpus}\n{build_user_prompt(truth, batch)}",
            vote_number=vote_number,
            compute=lambda: self.decide(truth, batch),
            schema=AuditVerdict,
            cache=self.cache,
            record=self.record,
            validate=lambda v: invalid_reason(v, batch),
        )
