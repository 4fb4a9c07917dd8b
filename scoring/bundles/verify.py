"""Verifying a run bundle: every metric recomputed from its verdicts with the functions the site
scores with, each audit outcome and checklist assessment decided again from its votes, and each
compared with what the bundle says was stored (one :class:`Check` per figure)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scoring.audit.board import (
    BOARD_LEVEL,
    BOARD_RESAMPLES,
    BOARD_SEED,
    f1_with_partial_interval,
)
from scoring.audit.matching import absorb_batch, audit_tie_break, postprocess, settle_partial
from scoring.audit.metrics import COUNT_KEYS, RATIO_KEYS, REPORT_KEYS, overall, repo_metrics
from scoring.audit.types import (
    JUDGE_FAILED,
    MATCH,
    NONE,
    PARTIAL,
    AuditVerdict,
    ScanItem,
    TruthOutcome,
)
from scoring.bundles.layout import (
    ABS_TOL,
    INPUTS,
    METRICS,
    REL_TOL,
    RUN,
    SUCCEEDED,
    VERDICTS,
    Bundle,
    BundleError,
    Check,
)
from scoring.bundles.shapes import SHAPES, check_shapes
from scoring.checklist.scores import PaperAssessment, checklist_scores, s_interval
from scoring.judges.consensus import Vote, decide
from scoring.probes.agreement import refusal_agreement
from scoring.probes.metrics import resilience_interval
from scoring.probes.tally import MetricsTally
from scoring.probes.types import CaseScore


def _ended_well(bundle: Bundle) -> bool:
    """Whether the run ended having stored every figure (a failed or cancelled run may have
    stopped before its metrics were written)."""
    return bool((bundle.get(RUN) or {}).get("status") == SUCCEEDED)


# --- Comparing ------------------------------------------------------------------------------


def same(stored: Any, recomputed: Any) -> bool:
    """Equal, with floats compared to :data:`REL_TOL` (ints and floats alike)."""
    if isinstance(stored, bool) or isinstance(recomputed, bool):
        return stored is recomputed or stored == recomputed
    if isinstance(stored, int | float) and isinstance(recomputed, int | float):
        return math.isclose(stored, recomputed, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(stored, Mapping) and isinstance(recomputed, Mapping):
        return set(stored) == set(recomputed) and all(
            same(stored[k], recomputed[k]) for k in stored
        )
    if isinstance(stored, list | tuple) and isinstance(recomputed, list | tuple):
        return len(stored) == len(recomputed) and all(
            same(a, b) for a, b in zip(stored, recomputed, strict=True)
        )
    return bool(stored == recomputed)


def _check(name: str, stored: Any, recomputed: Any) -> Check:
    return Check(name, same(stored, recomputed), stored, recomputed)


# --- Audit ----------------------------------------------------------------------------------


def latest_outcomes(rows: Iterable[Mapping[str, Any]]) -> dict[Any, Mapping[str, Any]]:
    """Per truth key, the row its run counts: the last judged one, else the last failed one
    (rows are appended: a resumed run keeps its failed attempt beside the new verdict)."""
    chosen: dict[Any, Mapping[str, Any]] = {}
    for row in rows:
        key = row["truth_key"]
        old = chosen.get(key)
        if old is None or row["outcome"] != JUDGE_FAILED or old["outcome"] == JUDGE_FAILED:
            chosen[key] = row
    return chosen


def outcome_from_votes(votes: Sequence[Mapping[str, Any]]) -> tuple[str, int | None]:
    """A truth finding's outcome and matched scan index, decided again from its votes, batch
    after batch, with the consensus and tie-break the run used."""
    result = TruthOutcome(truth_key=None, outcome=NONE)
    best: tuple[int, str] | None = None
    by_batch: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for vote in votes:
        by_batch[int(vote["batch"])].append(vote)
    for b in sorted(by_batch):
        cast: list[Vote[AuditVerdict]] = []
        for vote in sorted(by_batch[b], key=lambda v: int(v["vote"])):
            label = vote.get("verdict")
            if label not in (MATCH, PARTIAL, NONE):
                cast.append(Vote(int(vote["vote"]), None, None, str(vote.get("error", ""))))
                continue
            index = vote.get("index")
            verdict = AuditVerdict(
                is_match=label == MATCH,
                is_partial_match=label == PARTIAL,
                explanation=str(vote.get("explanation", "")),
                severity_from_junior_auditor="",
                severity_from_truth="",
                index_of_finding_from_junior_auditor=-1 if index is None else int(index),
            )
            cast.append(Vote(int(vote["vote"]), verdict, label))
        finished, best = absorb_batch(result, b, decide(cast, tie_break=audit_tie_break), best)
        if finished:
            return result.outcome, result.scan_index
    settle_partial(result, best)
    return result.outcome, result.scan_index


def _scan_items(scan: Iterable[Mapping[str, Any]]) -> list[ScanItem]:
    return [
        ScanItem(index=int(s["index"]), title="", severity=str(s.get("severity", ""))) for s in scan
    ]


def verify_audit(bundle: Bundle) -> list[Check]:
    inputs, verdicts, stored = bundle.get(INPUTS), bundle.get(VERDICTS), bundle.get(METRICS)
    checks: list[Check] = []
    by_repo: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in verdicts["truth_results"]:
        by_repo[row["repo"]].append(row)
    stored_repos = stored.get("repos", {})
    rows: list[dict[str, Any]] = []
    for repo in inputs["repos"]:
        project = repo["project_id"]
        latest = latest_outcomes(by_repo.get(project, []))
        # Votes decide each verdict: a verdict edited apart from its votes shows here.
        for truth in repo["truth"]:
            row = latest.get(truth["key"])
            if row is None or not row.get("votes"):
                continue
            label = f"{project} truth {truth['finding_id'] or truth['key']}"
            checks.append(
                _check(
                    f"{label} verdict",
                    [row["outcome"], row.get("scan_index")],
                    list(outcome_from_votes(row["votes"])),
                )
            )
        if project not in stored_repos:
            if _ended_well(bundle) and project in by_repo:
                # A run that succeeded stored every repo it judged: a missing one was deleted.
                checks.append(Check(f"{project} metrics", False, None, "stored by the run"))
            continue
        scans = _scan_items(repo["scan"])
        outcomes = [
            TruthOutcome(
                truth_key=t["key"],
                outcome=latest[t["key"]]["outcome"],
                finding_id=str(t.get("finding_id", "")),
                scan_index=latest[t["key"]].get("scan_index"),
            )
            for t in repo["truth"]
            if t["key"] in latest
        ]
        match = postprocess(outcomes, scans)
        metrics = repo_metrics(
            repo=project,
            truth_severities=[t["severity"] for t in repo["truth"]],
            scan_severities=[s.severity for s in scans],
            tp=match.count(MATCH),
            partial=match.count(PARTIAL),
            judge_failed=match.count(JUDGE_FAILED),
            not_judged=sum(1 for t in repo["truth"] if t["key"] not in latest),
        )
        metrics["dropped_partials"] = [
            o.truth_key
            for o in match.outcomes
            if o.outcome == PARTIAL and match.final[o.truth_key] != PARTIAL
        ]
        kept = stored_repos[project]
        for key in (*REPORT_KEYS, "judge_failed", "not_judged", "dropped_partials"):
            if key == "repo":
                continue
            checks.append(_check(f"{project} {key}", kept["metrics"].get(key), metrics.get(key)))
        checks.append(
            _check(
                f"{project} false_positive_indices",
                kept.get("false_positive_indices"),
                match.false_positives,
            )
        )
        rows.append(metrics)
    total = overall(rows) if rows else None
    kept_overall = stored.get("overall")
    if kept_overall is not None and total is not None:
        # Every figure the site stores (run_metrics), not just those the bundle kept.
        for key in (*RATIO_KEYS, *COUNT_KEYS):
            checks.append(_check(f"overall {key}", kept_overall.get(key), total.get(key)))
    elif total is not None and _ended_well(bundle):
        checks.append(Check("overall", False, None, "stored by the run"))
    if bundle.manifest.version >= 2:
        checks += _audit_interval_checks(stored.get("interval"), rows, bundle)
    return checks


def audit_board_interval(
    repo_rows: Sequence[Mapping[str, Any]],
    *,
    resamples: int = BOARD_RESAMPLES,
    level: float = BOARD_LEVEL,
    seed: int = BOARD_SEED,
) -> dict[str, Any] | None:
    """The audit board's F1+ interval over ``repo_rows`` (their metrics), as a bundle holds
    it: bounds and how it was drawn; None without truth findings."""
    interval = f1_with_partial_interval(repo_rows, resamples=resamples, level=level, seed=seed)
    if interval is None:
        return None
    return {
        "low": interval.low,
        "high": interval.high,
        "level": level,
        "resamples": resamples,
        "seed": seed,
    }


def _audit_interval_checks(
    kept: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]], bundle: Bundle
) -> list[Check]:
    if kept is None:
        if rows and _ended_well(bundle) and audit_board_interval(rows) is not None:
            return [Check("F1+ interval", False, None, "stored by the run")]
        return []
    again = audit_board_interval(
        rows, resamples=int(kept["resamples"]), level=float(kept["level"]), seed=int(kept["seed"])
    )
    recomputed = None if again is None else [again["low"], again["high"]]
    return [_check("F1+ interval", [kept["low"], kept["high"]], recomputed)]


# --- Probes ---------------------------------------------------------------------------------


def _cases(verdicts: Mapping[str, Any]) -> list[CaseScore]:
    fields = CaseScore.model_fields
    return [
        CaseScore.model_validate({k: v for k, v in row["case"].items() if k in fields})
        for row in verdicts["cases"]
    ]


def _flat(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key in sorted(value):
            yield from _flat(f"{prefix}.{key}" if prefix else str(key), value[key])
    else:
        yield prefix, value


def verify_probes(bundle: Bundle) -> list[Check]:
    inputs, verdicts, stored = bundle.get(INPUTS), bundle.get(VERDICTS), bundle.get(METRICS)
    checks: list[Check] = []
    for row in verdicts["cases"]:
        # A case's verdict is its own figures' consequence: an edited "passed" shows here.
        case = row["case"]
        checks.append(
            _check(
                f"case {row['probe_id']} passed",
                [row["passed"], row["weighted_risk"]],
                [case["passed"], case["weighted_risk"]],
            )
        )
    cases = _cases(verdicts)
    recomputed = MetricsTally().add_many(cases).result()
    kept = stored.get("metrics")
    if kept is None:
        if cases and _ended_well(bundle):
            checks.append(Check("metrics", False, None, "stored by the run"))
        return checks
    # Every figure the verdicts give must be stored: a deleted one is a mismatch, not skipped.
    stored_flat = dict(_flat("", {k: v for k, v in kept.items() if k in recomputed}))
    for key, value in _flat("", recomputed):
        checks.append(_check(key, stored_flat.get(key), value))
    checks.append(_check("resilience_index interval", stored.get("ci"), resilience_interval(cases)))
    if stored.get("agreement") is not None:
        # The refusal signal against the human labels (XSTest): the same figures again.
        labels = {r["response_id"]: r.get("human_label", "") for r in inputs["responses"]}
        rows = [
            (c.category, c.boundary_or_refusal_signal, labels.get(row["response_id"], ""))
            for c, row in zip(cases, verdicts["cases"], strict=True)
        ]
        again = dict(_flat("", refusal_agreement(rows, signal=stored["agreement"].get("signal"))))
        for key, value in _flat("", stored["agreement"]):
            checks.append(_check(f"agreement.{key}", value, again.get(key)))
    return checks


# --- Checklist ------------------------------------------------------------------------------


def _papers(verdicts: Mapping[str, Any]) -> dict[str, PaperAssessment]:
    """Per paper kind, the answers and the c of the latest judged assessment of each."""
    answers: dict[str, dict[int, str]] = defaultdict(dict)
    correct: dict[str, dict[int, int]] = defaultdict(dict)
    for row in verdicts["assessments"]:
        if row["status"] == "judge_failed":
            continue
        kind, number = row["paper_kind"], int(row["question"])
        answers[kind][number] = row["answer"]
        correct[kind][number] = int(row["correct"] or 0)
    return {k: PaperAssessment(answers=answers[k], correct=correct[k]) for k in answers}


def correct_from_votes(votes: Sequence[Mapping[str, Any]]) -> set[int | None]:
    """The c that an assessment's votes allow: the majority's (with the first vote breaking a
    tie), and, where the run asked for one vote (CHECKLIST_SINGLE_VOTE), the first valid
    vote's. ``None`` stands for no verdict (the assessment failed)."""
    cast: list[Vote[bool]] = [
        Vote(int(v["number"]), bool(v["correct"]), "1" if v["correct"] else "0")
        if v.get("correct") is not None
        else Vote(int(v["number"]), None, None, str(v.get("error", "")))
        for v in sorted(votes, key=lambda v: int(v["number"]))
    ]
    decided = decide(cast)
    allowed: set[int | None] = {None if decided.label is None else int(decided.label)}
    first = next((v for v in cast if v.ok), None)
    allowed.add(None if first is None else int(str(first.label)))
    return allowed


def verify_checklist(bundle: Bundle) -> list[Check]:
    stored = bundle.get(METRICS)
    verdicts = bundle.get(VERDICTS)
    checks: list[Check] = []
    for row in verdicts["assessments"]:
        if not row.get("votes"):
            continue
        allowed = correct_from_votes(row["votes"])
        c = None if row["status"] == "judge_failed" else row["correct"]
        name = f"{row['paper_kind']} question {row['question']} verdict"
        checks.append(Check(name, c in allowed, c, sorted(allowed, key=str)))
    papers = _papers(verdicts)
    if not stored.get("scores"):
        if "G" in papers and _ended_well(bundle):
            checks.append(Check("scores", False, stored.get("scores"), "stored by the run"))
        return checks
    if "G" not in papers:
        return [*checks, _check("scores", stored["scores"], None)]
    triplet = (papers["G"], papers.get("A"), papers.get("T"))
    scores = checklist_scores(*triplet)
    checks += [
        _check(key, stored["scores"].get(key), getattr(scores, key))
        for key in ("c_g", "c_a", "c_t", "r", "s")
    ]
    checks.append(_check("s interval", stored.get("ci"), s_interval(*triplet)))
    return checks


VERIFIERS = {"audit": verify_audit, "probes": verify_probes, "checklist": verify_checklist}


def verify(bundle: Bundle) -> list[Check]:
    """Every check of ``bundle``: its members' checksums, then each metric recomputed."""
    checks = [
        Check(f"member {name} checksum", False, "sha256 in manifest", "differs")
        for name in bundle.tampered
    ]
    if bundle.tampered:
        return checks
    check_shapes(bundle)
    members = ", ".join(sorted(SHAPES[bundle.manifest.benchmark][bundle.manifest.version]))
    try:
        return VERIFIERS[bundle.manifest.benchmark](bundle)
    except KeyError as exc:
        raise BundleError(f"{members}: a member lacks the field {exc.args[0]!r}") from None
    except (
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        OverflowError,
        RecursionError,
        ZeroDivisionError,
    ) as exc:
        # ValidationError is a ValueError: a case or verdict that is not what it should be.
        # The shapes above name the member for everything they cover; this is the rest.
        raise BundleError(f"{members}: a malformed value ({type(exc).__name__}: {exc})") from None
