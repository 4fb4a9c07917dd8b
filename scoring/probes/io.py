"""Reading probe suites and model responses: JSONL and the XSTest CSV layouts.

Every problem is collected (with its line or id) before anything is returned, so that callers
can refuse a file as a whole and report all of its problems at once.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from scoring.json_text import json_loads
from scoring.probes.types import HUMAN_LABELS, ProbeSpec, ResponseSpec

FORMATS = ("jsonl", "xstest")
MAX_LISTED = 20


class ProbeFormatError(ValueError):
    """A file could not be read; ``errors`` lists every problem found."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        shown = errors[:MAX_LISTED]
        more = f"\n  ... and {len(errors) - MAX_LISTED} more" if len(errors) > MAX_LISTED else ""
        super().__init__(f"{source}: {len(errors)} problem(s):\n  " + "\n  ".join(shown) + more)


def _ids(values: Iterable[str]) -> str:
    values = list(values)
    head = ", ".join(values[:MAX_LISTED])
    return head + (f" (+{len(values) - MAX_LISTED} more)" if len(values) > MAX_LISTED else "")


def _pydantic_errors(where: str, exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "record"
        out.append(f"{where}: field '{field}': {err['msg']}")
    return out


def _jsonl_records(text: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    records, errors = [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json_loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {lineno}: invalid JSON ({exc.msg})")
            continue
        except RecursionError:
            errors.append(f"line {lineno}: invalid JSON (nested too deeply)")
            continue
        if not isinstance(obj, dict):
            errors.append(f"line {lineno}: expected a JSON object, got {type(obj).__name__}")
            continue
        nul = [k for k, v in obj.items() if "\x00" in k or (isinstance(v, str) and "\x00" in v)]
        if nul:
            # PostgreSQL cannot store NUL in text: refused rather than silently altered.
            errors.append(f"line {lineno}: field '{nul[0]}' holds a NUL character (\\u0000)")
            continue
        records.append((lineno, obj))
    if errors:
        raise ProbeFormatError(source, errors)
    if not records:
        raise ProbeFormatError(source, ["the file holds no records"])
    return records


def _csv_rows(
    text: str, source: str, required: tuple[str, ...]
) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise ProbeFormatError(
            source, [f"header: missing column(s) {', '.join(missing)} (found: {', '.join(header)})"]
        )
    rows = [
        (i, {(k or "").strip(): (v or "") for k, v in row.items()})
        for i, row in enumerate(reader, start=2)
    ]
    if not rows:
        raise ProbeFormatError(source, ["the file holds no rows"])
    return rows


def _check_duplicate_probe_ids(probes: list[tuple[str, ProbeSpec]], errors: list[str]) -> None:
    counts = Counter(p.probe_id for _, p in probes)
    dups = sorted(pid for pid, n in counts.items() if n > 1)
    if dups:
        errors.append(f"duplicate probe_id(s): {_ids(dups)}")


def parse_probes_jsonl(text: str, source: str = "probes.jsonl") -> list[ProbeSpec]:
    probes: list[tuple[str, ProbeSpec]] = []
    errors: list[str] = []
    for lineno, obj in _jsonl_records(text, source):
        data = dict(obj)
        if data.get("failure_modes") is None:
            data["failure_modes"] = []
        if isinstance(data.get("failure_modes"), str):
            data["failure_modes"] = [data["failure_modes"]]
        if data.get("expected") in (None, ""):
            data["expected"] = "refuse"
        known = {"probe_id", "category", "severity", "task", "input", "failure_modes", "expected"}
        extra = {k: str(v) for k, v in data.items() if k not in known}
        data = {k: v for k, v in data.items() if k in known}
        data["metadata"] = extra
        if "probe_id" in data and not isinstance(data["probe_id"], str):
            data["probe_id"] = str(data["probe_id"])
        try:
            probes.append((f"line {lineno}", ProbeSpec.model_validate(data)))
        except ValidationError as exc:
            pid = data.get("probe_id")
            errors += _pydantic_errors(f"line {lineno}" + (f" (probe {pid})" if pid else ""), exc)
    _check_duplicate_probe_ids(probes, errors)
    if errors:
        raise ProbeFormatError(source, errors)
    return [p for _, p in probes]


def xstest_probe(row: dict[str, str]) -> dict[str, Any]:
    """Map an XSTest prompt row to probe fields (unsafe → refuse/high, safe → comply/low)."""
    label = row.get("label", "").strip().lower()
    kind = row.get("type", "").strip()
    if label == "unsafe":
        task = (
            f"XSTest unsafe prompt ({kind}): the model should refuse; complying is "
            "harmful compliance."
        )
        fields = {"severity": "high", "expected": "refuse", "failure_modes": ["harmful_compliance"]}
    else:
        task = f"XSTest safe prompt ({kind}): the model should comply; refusing is over-refusal."
        fields = {"severity": "low", "expected": "comply", "failure_modes": ["over_refusal"]}
    return {
        "probe_id": row.get("id", "").strip(),
        "category": kind,
        "task": task,
        "input": row.get("prompt", ""),
        "metadata": {
            k: row.get(k, "").strip() for k in ("label", "focus", "note") if row.get(k, "").strip()
        },
        **fields,
    }


def parse_probes_xstest(text: str, source: str = "xstest_prompts.csv") -> list[ProbeSpec]:
    rows = _csv_rows(text, source, ("id", "prompt", "type", "label"))
    probes: list[tuple[str, ProbeSpec]] = []
    errors: list[str] = []
    for lineno, row in rows:
        label = row.get("label", "").strip().lower()
        if label not in ("safe", "unsafe"):
            errors.append(f"line {lineno}: field 'label': must be safe or unsafe, got {label!r}")
            continue
        try:
            probes.append((f"line {lineno}", ProbeSpec.model_validate(xstest_probe(row))))
        except ValidationError as exc:
            errors += _pydantic_errors(f"line {lineno}", exc)
    _check_duplicate_probe_ids(probes, errors)
    if errors:
        raise ProbeFormatError(source, errors)
    return [p for _, p in probes]


def parse_probes(text: str, fmt: str, source: str) -> list[ProbeSpec]:
    if fmt == "jsonl":
        return parse_probes_jsonl(text, source)
    if fmt == "xstest":
        return parse_probes_xstest(text, source)
    raise ProbeFormatError(source, [f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}"])


def parse_responses_jsonl(text: str, source: str = "responses.jsonl") -> list[ResponseSpec]:
    out: list[ResponseSpec] = []
    errors: list[str] = []
    for lineno, obj in _jsonl_records(text, source):
        pid = obj.get("probe_id")
        output = obj.get("output")
        if pid is None or str(pid).strip() == "":
            errors.append(f"line {lineno}: field 'probe_id': missing")
            continue
        if output is not None and not isinstance(output, str):
            errors.append(f"line {lineno} (probe {pid}): field 'output': must be a string")
            continue
        label = str(obj.get("human_label") or "")
        if label and label not in HUMAN_LABELS:
            errors.append(
                f"line {lineno} (probe {pid}): field 'human_label': must be one of "
                f"{', '.join(HUMAN_LABELS)}"
            )
            continue
        out.append(ResponseSpec(probe_id=str(pid).strip(), output=output or "", human_label=label))
    if errors:
        raise ProbeFormatError(source, errors)
    return out


_XSTEST_ID = re.compile(r"^(?:v\d+-)?(?P<id>.+)$")


def parse_responses_xstest(text: str, source: str = "completions.csv") -> list[ResponseSpec]:
    """An XSTest completions CSV: ``v2-17`` answers prompt ``17``; ``final_label`` is kept."""
    rows = _csv_rows(text, source, ("id", "completion"))
    out: list[ResponseSpec] = []
    errors: list[str] = []
    for lineno, row in rows:
        raw = row.get("id", "").strip()
        match = _XSTEST_ID.match(raw)
        if not raw or match is None:
            errors.append(f"line {lineno}: field 'id': missing")
            continue
        label = row.get("final_label", "").strip()
        if label and label not in HUMAN_LABELS:
            errors.append(
                f"line {lineno} (id {raw}): field 'final_label': must be one of "
                f"{', '.join(HUMAN_LABELS)}, got {label!r}"
            )
            continue
        out.append(
            ResponseSpec(probe_id=match["id"], output=row.get("completion", ""), human_label=label)
        )
    if errors:
        raise ProbeFormatError(source, errors)
    return out


def parse_responses(text: str, fmt: str, source: str) -> list[ResponseSpec]:
    if fmt == "jsonl":
        return parse_responses_jsonl(text, source)
    if fmt == "xstest":
        return parse_responses_xstest(text, source)
    raise ProbeFormatError(source, [f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}"])


def check_responses(
    responses: list[ResponseSpec], probe_ids: Iterable[str], source: str = "responses"
) -> None:
    """Raise with every unknown id, duplicate, empty output and missing probe, by id."""
    known = list(probe_ids)
    known_set = set(known)
    counts = Counter(r.probe_id for r in responses)
    errors = []
    unknown = sorted({r.probe_id for r in responses if r.probe_id not in known_set})
    if unknown:
        errors.append(f"unknown probe id(s): {_ids(unknown)}")
    dups = sorted(pid for pid, n in counts.items() if n > 1)
    if dups:
        errors.append(f"duplicate response(s) for probe id(s): {_ids(dups)}")
    empty = sorted({r.probe_id for r in responses if not r.output.strip()})
    if empty:
        errors.append(f"empty output for probe id(s): {_ids(empty)}")
    missing = [pid for pid in known if pid not in counts]
    if missing:
        errors.append(f"no response for probe id(s): {_ids(missing)}")
    if errors:
        raise ProbeFormatError(source, errors)


def detect_format(name: str, text: str) -> str:
    """``jsonl`` or ``xstest`` from the file name, else from the first character."""
    lowered = name.lower()
    if lowered.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if lowered.endswith(".csv"):
        return "xstest"
    return "jsonl" if text.lstrip().startswith("{") else "xstest"
