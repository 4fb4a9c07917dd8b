"""A bundle's audit verdicts as the files the ``replay:DIR`` audit judge reads, so a judge made
from a bundle (``judge_add --from-bundle``) re-runs the entry without a call."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from scoring.audit.types import (
    MATCH,
    NONE,
    PARTIAL,
)
from scoring.bundles.layout import (
    INPUTS,
    REPO_ID_PATTERN,
    VERDICTS,
    Bundle,
    BundleError,
)
from scoring.bundles.shapes import check_shapes
from scoring.bundles.verify import latest_outcomes


def audit_replay_files(bundle: Bundle) -> dict[str, list[dict[str, Any]]]:
    """``{project_id: rows}`` in the layout the ``replay:DIR`` audit judge reads
    (``DIR/<project_id>_results.json``): one row per truth finding in truth order, with the
    run's verdict before post-processing, so matching replays to the same outcomes."""
    if bundle.manifest.benchmark != "audit":
        raise BundleError(f"benchmark: a {bundle.manifest.benchmark} bundle has no audit verdicts")
    if bundle.tampered:
        raise BundleError(f"{', '.join(bundle.tampered)}: checksum differs from the manifest")
    check_shapes(bundle)
    by_repo: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in bundle.get(VERDICTS)["truth_results"]:
        by_repo[row["repo"]].append(row)
    files: dict[str, list[dict[str, Any]]] = {}
    for repo in bundle.get(INPUTS)["repos"]:
        if not re.fullmatch(REPO_ID_PATTERN, repo["project_id"]) or ".." in repo["project_id"]:
            raise BundleError(f"{INPUTS}: project_id {repo['project_id'][:80]!r} is not a repo id")
        latest = latest_outcomes(by_repo.get(repo["project_id"], []))
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
