"""Run bundles: one archive per run that anyone can re-score with ``scoring/`` alone.

A bundle is a zip of JSON members and ``manifest.json`` (a versioned :class:`Manifest` that
lists every member with its size and sha256). The members hold the run's inputs (scan findings,
responses, papers' answers), its judge record (never an API key: only the name of the
variable that holds it), every judge call with its prompt and raw answer, the votes and
verdicts, the stored metrics and, for public data only, the truth's text. :func:`verify`
recomputes every metric from the verdicts with the functions the site scores with, and each
audit outcome and checklist assessment from its votes; nothing here needs a database or a
network.

Checks compare what the bundle says was stored with what its own verdicts give: a bundle whose
member was edited after it was written fails its checksum, and one whose checksums were
rewritten to match an edited verdict fails the metric (or vote) it feeds.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import sys
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scoring.audit.matching import absorb_batch, audit_tie_break, postprocess, settle_partial
from scoring.audit.metrics import REPORT_KEYS, overall, repo_metrics
from scoring.audit.types import (
    JUDGE_FAILED,
    MATCH,
    NONE,
    PARTIAL,
    AuditVerdict,
    ScanItem,
    TruthOutcome,
)
from scoring.checklist.scores import PaperAssessment, checklist_scores, s_interval
from scoring.judges.consensus import Vote, decide
from scoring.probes.agreement import refusal_agreement
from scoring.probes.metrics import resilience_interval
from scoring.probes.tally import MetricsTally
from scoring.probes.types import CaseScore

FORMAT: Literal["run-bundle"] = "run-bundle"
VERSION: Literal[1] = 1
MANIFEST = "manifest.json"
# The members every bundle has; ``truth.json`` only where some truth is public.
RUN, INPUTS, VERDICTS, METRICS, CALLS, PROMPTS, TRUTH = (
    "run.json",
    "inputs.json",
    "verdicts.json",
    "metrics.json",
    "calls.json",
    "prompts.json",
    "truth.json",
)
REQUIRED = (RUN, INPUTS, VERDICTS, METRICS, CALLS, PROMPTS)
# Bounds on what a bundle may unpack to: it comes from anywhere.
MAX_MEMBERS = 20
MAX_TOTAL_BYTES = 2 * 2**30
# Every member is written with this time, so that one run always gives the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# How close a recomputed figure must be to the stored one: they come from the same functions,
# so only a float's last bits (JSON round trips are exact) may differ.
REL_TOL = 1e-9
ABS_TOL = 1e-12

Benchmark = Literal["audit", "probes", "checklist"]


class BundleError(ValueError):
    """A bundle that cannot be read; the message names the member or field."""


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class Manifest(BaseModel):
    """What ``manifest.json`` holds; ``version`` changes whenever a member's layout does."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["run-bundle"]
    version: Literal[1]
    benchmark: Benchmark
    run_id: int
    # True when some of the run's truth is hidden and its text (with the prompts and answers
    # that quote it) was left out.
    truth_withheld: bool
    members: list[Member]


@dataclass(frozen=True)
class Bundle:
    manifest: Manifest
    members: dict[str, Any]  # member name → decoded JSON
    # Members whose bytes do not hash to the manifest's sha256 (or are missing, or unlisted).
    tampered: tuple[str, ...] = ()

    def get(self, name: str) -> Any:
        return self.members.get(name)


@dataclass(frozen=True)
class Check:
    """One figure compared: ``ok`` when the bundle's stored value is what its verdicts give."""

    name: str
    ok: bool
    stored: Any = None
    recomputed: Any = None

    def line(self) -> str:
        mark = "ok      " if self.ok else "MISMATCH"
        if self.ok:
            return f"{mark} {self.name} = {_short(self.stored)}"
        stored, recomputed = _short(self.stored), _short(self.recomputed)
        return f"{mark} {self.name}: stored {stored}, recomputed {recomputed}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


# --- Writing --------------------------------------------------------------------------------


def _encode(value: Any) -> bytes:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")


def write_bundle(
    *,
    benchmark: str,
    run_id: int,
    members: Mapping[str, Any],
    truth_withheld: bool,
) -> bytes:
    """The archive of ``members`` (name → JSON value) with its manifest; same input, same bytes."""
    missing = [name for name in REQUIRED if name not in members]
    if missing:
        raise BundleError(f"members: {', '.join(missing)} missing")
    encoded = {name: _encode(value) for name, value in sorted(members.items())}
    manifest = Manifest(
        format=FORMAT,
        version=VERSION,
        benchmark=benchmark,  # type: ignore[arg-type]
        run_id=run_id,
        truth_withheld=truth_withheld,
        members=[
            Member(name=name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
            for name, data in encoded.items()
        ],
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in [(MANIFEST, _encode(manifest.model_dump())), *encoded.items()]:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out.getvalue()


# --- Reading --------------------------------------------------------------------------------


def read_bundle(data: bytes) -> Bundle:
    """The bundle in ``data``; a member whose bytes do not match the manifest is listed in
    ``tampered`` (and not decoded). Raises :class:`BundleError` when it cannot be read."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError):
        raise BundleError("not a readable .zip archive") from None
    infos = {i.filename: i for i in archive.infolist() if not i.is_dir()}
    if len(infos) > MAX_MEMBERS:
        raise BundleError(f"the archive holds more than {MAX_MEMBERS} files")
    if sum(i.file_size for i in infos.values()) > MAX_TOTAL_BYTES:
        raise BundleError(f"the archive unpacks to more than {MAX_TOTAL_BYTES // 2**20} MB")
    if MANIFEST not in infos:
        raise BundleError(f"{MANIFEST}: missing; not a run bundle")
    try:
        manifest = Manifest.model_validate_json(archive.read(infos[MANIFEST]))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise BundleError(f"{MANIFEST}: {where}: {first['msg']}") from None
    listed = {m.name: m for m in manifest.members}
    tampered = sorted(name for name in infos if name != MANIFEST and name not in listed)
    members: dict[str, Any] = {}
    for name, member in listed.items():
        info = infos.get(name)
        if info is None:
            tampered.append(name)
            continue
        raw = archive.read(info)
        if len(raw) != member.bytes or hashlib.sha256(raw).hexdigest() != member.sha256:
            tampered.append(name)
            continue
        try:
            members[name] = json.loads(raw)
        except ValueError as exc:
            raise BundleError(f"{name}: not JSON ({exc})") from None
    missing = [name for name in REQUIRED if name not in listed]
    if missing:
        raise BundleError(f"{MANIFEST}: members {', '.join(missing)} not listed")
    return Bundle(manifest, members, tuple(sorted(set(tampered))))


def read_bundle_file(path: str | Path) -> Bundle:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BundleError(f"{path}: {exc.strerror or exc}") from None
    return read_bundle(data)


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


def _latest_outcomes(rows: Iterable[Mapping[str, Any]]) -> dict[Any, Mapping[str, Any]]:
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
        latest = _latest_outcomes(by_repo.get(project, []))
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
    if "overall" in stored and stored["overall"] is not None:
        total = overall(rows)
        for key, value in stored["overall"].items():
            if key in total:
                checks.append(_check(f"overall {key}", value, total[key]))
    return checks


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
    kept = {k: v for k, v in (stored.get("metrics") or {}).items() if k in recomputed}
    mine = dict(_flat("", recomputed))
    for key, value in _flat("", kept):
        checks.append(_check(key, value, mine.get(key)))
    if "ci" in stored:
        checks.append(_check("resilience_index interval", stored["ci"], resilience_interval(cases)))
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
        return checks
    if "G" not in papers:
        return [*checks, _check("scores", stored["scores"], None)]
    triplet = (papers["G"], papers.get("A"), papers.get("T"))
    scores = checklist_scores(*triplet)
    checks += [
        _check(key, stored["scores"].get(key), getattr(scores, key))
        for key in ("c_g", "c_a", "c_t", "r", "s")
    ]
    if "ci" in stored:
        checks.append(_check("s interval", stored["ci"], s_interval(*triplet)))
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
    try:
        return VERIFIERS[bundle.manifest.benchmark](bundle)
    except KeyError as exc:
        raise BundleError(f"a member lacks the field {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        # ValidationError is a ValueError: a case or verdict that is not what it should be.
        raise BundleError(f"a member holds a malformed value: {exc}") from None


# --- Replay ---------------------------------------------------------------------------------


def audit_replay_files(bundle: Bundle) -> dict[str, list[dict[str, Any]]]:
    """``{project_id: rows}`` in the layout the ``replay:DIR`` audit judge reads
    (``DIR/<project_id>_results.json``): one row per truth finding in truth order, with the
    run's verdict before post-processing, so matching replays to the same outcomes."""
    if bundle.manifest.benchmark != "audit":
        raise BundleError(f"benchmark: a {bundle.manifest.benchmark} bundle has no audit verdicts")
    if bundle.tampered:
        raise BundleError(f"{', '.join(bundle.tampered)}: checksum differs from the manifest")
    by_repo: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in bundle.get(VERDICTS)["truth_results"]:
        by_repo[row["repo"]].append(row)
    files: dict[str, list[dict[str, Any]]] = {}
    for repo in bundle.get(INPUTS)["repos"]:
        latest = _latest_outcomes(by_repo.get(repo["project_id"], []))
        rows = []
        for truth in repo["truth"]:
            row = latest.get(truth["key"], {})
            outcome = row.get("outcome", NONE)
            index = row.get("scan_index")
            rows.append(
                {
                    "finding_id": truth.get("finding_id", ""),
                    "is_fp": False,
                    "is_match": outcome == MATCH,
                    "is_partial_match": outcome == PARTIAL,
                    "index_of_finding_from_junior_auditor": -1 if index is None else index,
                    "explanation": str(row.get("explanation", "")),
                    "severity_from_truth": truth.get("severity", ""),
                    "severity_from_junior_auditor": "",
                }
            )
        files[repo["project_id"]] = rows
    return files


# --- Command line ---------------------------------------------------------------------------


def report(checks: Sequence[Check], *, verbose: bool = False) -> tuple[str, bool]:
    """The lines to print (every mismatch; every check with ``verbose``) and whether all held."""
    bad = [c for c in checks if not c.ok]
    lines = [c.line() for c in (checks if verbose else bad)]
    if not checks:
        lines.append("nothing to check: the bundle holds no metrics")
    lines.append(
        f"{len(checks) - len(bad)} of {len(checks)} checks match"
        + ("" if not bad else f"; {len(bad)} MISMATCH")
    )
    return "\n".join(lines), bool(checks) and not bad


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scoring.bundles BUNDLE``: verify without Django (what ``verify_run`` runs)."""
    parser = argparse.ArgumentParser(prog="python -m scoring.bundles", description=main.__doc__)
    parser.add_argument("bundle")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every check")
    args = parser.parse_args(argv)
    try:
        bundle = read_bundle_file(args.bundle)
        checks = verify(bundle)
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text, ok = report(checks, verbose=args.verbose)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
