"""What a run bundle is made of: its member names, the manifest that lists them, the bounds a
reader holds any bundle to, and the :class:`Bundle` and :class:`Check` the other modules of
:mod:`scoring.bundles` pass around."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT: Literal["run-bundle"] = "run-bundle"
# Version 2 adds the audit board's F1+ interval to metrics.json and writes every metrics key
# (null where the run stored none); version 1 bundles still read and verify without it.
VERSION: Literal[2] = 2
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
# Bounds on what a bundle may hold: it comes from anywhere. A large real run (an audit run of
# every bundled repo with its judge ledger) unpacks to a few tens of MB in all; these leave
# room for it and keep the reader of a hostile file within ~300 MB and a few seconds.
MAX_MEMBERS = 20
MAX_ARCHIVE_BYTES = 64 * 2**20
MAX_DIRECTORY_BYTES = 2**20
MAX_MEMBER_BYTES = 48 * 2**20
MAX_TOTAL_BYTES = 96 * 2**20
# Deflate packs JSON about 5-20 to 1; a member packed much tighter is a bomb, not a run.
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 2**20
READ_CHUNK = 2**20
# JSON bounds: the format nests a handful of levels and stores counts, ids and ratios.
MAX_DEPTH = 32
MAX_INT_DIGITS = 19
# Commas and brackets counted before decoding (an upper bound on the values): a few million
# small values already take hundreds of MB as Python objects.
MAX_JSON_VALUES = 3_000_000
MEMBER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# A repo's project id as bundles carry it (``code4rena_kinetiq_2025_07``): a replay judge
# writes ``<project_id>_results.json`` from it, so no separator, no leading dot, no "..".
REPO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$"
# Every member is written with this time, so that one run always gives the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# How close a recomputed figure must be to the stored one: they come from the same functions,
# so only a float's last bits (JSON round trips are exact) may differ.
REL_TOL = 1e-9
ABS_TOL = 1e-12

Benchmark = Literal["audit", "probes", "checklist"]
# A run that ended with every figure stored (RunStatus.SUCCEEDED on the site).
SUCCEEDED = "succeeded"
# The most bootstrap resamples a bundle may ask its verifier to draw.
MAX_RESAMPLES = 100_000


class BundleError(ValueError):
    """A bundle that cannot be read; the message names the member or field."""


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0, le=MAX_MEMBER_BYTES)


class Manifest(BaseModel):
    """What ``manifest.json`` holds; ``version`` changes whenever a member's layout does."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["run-bundle"]
    version: Literal[1, 2]
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
