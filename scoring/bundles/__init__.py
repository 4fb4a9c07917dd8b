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

The package, one module per concern: :mod:`~scoring.bundles.layout` (members, manifest,
bounds), :mod:`~scoring.bundles.write`, :mod:`~scoring.bundles.read` (a hostile file's
bounds), :mod:`~scoring.bundles.shapes` (what each member must hold),
:mod:`~scoring.bundles.verify`, :mod:`~scoring.bundles.replay` (a bundle as a replay judge's
files) and :mod:`~scoring.bundles.cli` (``python -m scoring.bundles``). Its names are
re-exported here: the site, its commands and the tests read bundles as ``bundles.X``.
"""

from __future__ import annotations

from scoring.bundles.cli import (
    main,
    report,
)
from scoring.bundles.layout import (
    ABS_TOL,
    CALLS,
    FORMAT,
    INPUTS,
    MANIFEST,
    MAX_ARCHIVE_BYTES,
    MAX_DEPTH,
    MAX_DIRECTORY_BYTES,
    MAX_INT_DIGITS,
    MAX_JSON_VALUES,
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_RESAMPLES,
    MAX_TOTAL_BYTES,
    MEMBER_NAME,
    METRICS,
    PROMPTS,
    RATIO_FLOOR_BYTES,
    READ_CHUNK,
    REL_TOL,
    REPO_ID_PATTERN,
    REQUIRED,
    RUN,
    SUCCEEDED,
    TRUTH,
    VERDICTS,
    VERSION,
    ZIP_TIME,
    Benchmark,
    Bundle,
    BundleError,
    Check,
    Manifest,
    Member,
)
from scoring.bundles.read import (
    decode_member,
    read_bundle,
    read_bundle_file,
)
from scoring.bundles.replay import (
    audit_replay_files,
)
from scoring.bundles.shapes import (
    SHAPES,
    check_shapes,
)
from scoring.bundles.verify import (
    VERIFIERS,
    audit_board_interval,
    correct_from_votes,
    outcome_from_votes,
    same,
    verify,
    verify_audit,
    verify_checklist,
    verify_probes,
)
from scoring.bundles.write import (
    write_bundle,
)

__all__ = [
    "ABS_TOL",
    "CALLS",
    "FORMAT",
    "INPUTS",
    "MANIFEST",
    "MAX_ARCHIVE_BYTES",
    "MAX_DEPTH",
    "MAX_DIRECTORY_BYTES",
    "MAX_INT_DIGITS",
    "MAX_JSON_VALUES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_RATIO",
    "MAX_RESAMPLES",
    "MAX_TOTAL_BYTES",
    "MEMBER_NAME",
    "METRICS",
    "PROMPTS",
    "RATIO_FLOOR_BYTES",
    "READ_CHUNK",
    "REL_TOL",
    "REPO_ID_PATTERN",
    "REQUIRED",
    "RUN",
    "SHAPES",
    "SUCCEEDED",
    "TRUTH",
    "VERDICTS",
    "VERIFIERS",
    "VERSION",
    "ZIP_TIME",
    "Benchmark",
    "Bundle",
    "BundleError",
    "Check",
    "Manifest",
    "Member",
    "audit_board_interval",
    "audit_replay_files",
    "check_shapes",
    "correct_from_votes",
    "decode_member",
    "main",
    "outcome_from_votes",
    "read_bundle",
    "read_bundle_file",
    "report",
    "same",
    "verify",
    "verify_audit",
    "verify_checklist",
    "verify_probes",
    "write_bundle",
]
