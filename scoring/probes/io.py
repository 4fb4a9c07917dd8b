"""Reading probe suites and model responses: JSONL and the XSTest CSV layouts.

Every problem is collected (with its line or id) before anything is returned, so that callers
can refuse a file as a whole and report all of its problems at once.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from scoring.json_text import json_loads
from scoring.limits import DEFAULT_LIMITS, TextLimits, overlong_fields, too_long
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


class RowCapExceeded(ProbeFormatError):
    """More rows than ``max_rows``: reading stopped there (``line`` is the line it stopped at);
    the caller, who knows why that is the cap, says so to the user."""

    def __init__(self, source: str, max_rows: int, line: int) -> None:
        self.max_rows = max_rows
        self.line = line
        super().__init__(source, [f"more than {max_rows:,} rows (reading stopped at line {line})"])


def _lines(text: str | Iterable[str]) -> Iterator[str]:
    """The lines of a whole text, endings kept, or of a stream of lines: one at a time, so
    that a reader that stops early costs no list of every line (nor, as ``io.StringIO``
    would, a copy of the text at four bytes a character)."""
    if not isinstance(text, str):
        yield from text
        return
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            yield text[start:]
            return
        yield text[start : stop + 1]
        start = stop + 1


def _overlong(where: str, row: dict[str, Any], limits: TextLimits) -> list[str]:
    """``where: field 'output': 60,001 characters, more than the 50,000 allowed`` for each
    field of ``row`` over its limit (nested values by their path)."""
    out = []
    for key, value in row.items():
        name = str(key)
        if len(name) > limits.ref:
            out.append(too_long(f"{where}: a field name", len(name), limits.ref))
        elif isinstance(value, str):
            if len(value) > limits.for_key(name):
                out.append(too_long(f"{where}: field '{name}'", len(value), limits.for_key(name)))
        elif isinstance(value, dict | list):
            out += overlong_fields(value, f"{where}: field '{name}'", limits)
    return out


def _jsonl_records(
    text: str | Iterable[str],
    source: str,
    *,
    max_rows: int | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[tuple[int, dict[str, Any]]]:
    """The records of a JSON Lines text, read line by line: past ``max_rows`` records it
    stops reading (:class:`RowCapExceeded`), and a field over ``limits`` is an error."""
    records, errors = [], []
    rows = 0
    for lineno, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        rows += 1
        if max_rows is not None and rows > max_rows:
            raise RowCapExceeded(source, max_rows, lineno)
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
        overlong = _overlong(f"line {lineno}", obj, limits)
        if overlong:
            errors += overlong
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


class _Lines:
    """The lines of a text, its BOM dropped, counting those read: the line a CSV error is on
    (the csv module's own ``line_num`` lags by one when a field breaks its size limit)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.read = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.read += 1
        return line.removeprefix("\ufeff") if self.read == 1 else line


def _csv_rows(
    text: str | Iterable[str],
    source: str,
    required: tuple[str, ...],
    *,
    max_rows: int | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[tuple[int, dict[str, str]]]:
    """The rows of a CSV text, read row by row: past ``max_rows`` rows it stops reading
    (:class:`RowCapExceeded`), and a field over ``limits`` is an error (the row is not kept)."""
    lines = _Lines(_lines(text))
    reader = csv.DictReader(lines)
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as exc:
        raise ProbeFormatError(source, [_csv_problem(lines.read, exc, limits)]) from None
    missing = [c for c in required if c not in header]
    if missing:
        raise ProbeFormatError(
            source, [f"header: missing column(s) {', '.join(missing)} (found: {', '.join(header)})"]
        )
    rows, errors = [], []
    try:
        for i, row in enumerate(reader, start=1):
            lineno = reader.line_num
            if max_rows is not None and i > max_rows:
                raise RowCapExceeded(source, max_rows, lineno)
            clean = {(k or "").strip(): (v or "") for k, v in row.items()}
            overlong = _overlong(f"line {lineno}", clean, limits)
            if overlong:
                errors += overlong
                continue
            rows.append((lineno, clean))
    except csv.Error as exc:
        errors.append(_csv_problem(lines.read, exc, limits))
    if errors:
        raise ProbeFormatError(source, errors)
    if not rows:
        raise ProbeFormatError(source, ["the file holds no rows"])
    return rows


def _csv_problem(line: int, exc: csv.Error, limits: TextLimits) -> str:
    if "field larger than field limit" in str(exc):
        # The csv module's own cap (131,072 characters) is past ours: say ours.
        return (
            f"line {line}: a field holds more than {csv.field_size_limit():,} "
            f"characters; at most {limits.text:,} are allowed"
        )
    return f"line {line}: not valid CSV ({exc})"


def _check_duplicate_probe_ids(probes: list[tuple[str, ProbeSpec]], errors: list[str]) -> None:
    counts = Counter(p.probe_id for _, p in probes)
    dups = sorted(pid for pid, n in counts.items() if n > 1)
    if dups:
        errors.append(f"duplicate probe_id(s): {_ids(dups)}")


def parse_probes_jsonl(
    text: str | Iterable[str], source: str = "probes.jsonl", *, limits: TextLimits = DEFAULT_LIMITS
) -> list[ProbeSpec]:
    probes: list[tuple[str, ProbeSpec]] = []
    errors: list[str] = []
    for lineno, obj in _jsonl_records(text, source, limits=limits):
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


def parse_probes_xstest(
    text: str | Iterable[str],
    source: str = "xstest_prompts.csv",
    *,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[ProbeSpec]:
    rows = _csv_rows(text, source, ("id", "prompt", "type", "label"), limits=limits)
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


def parse_probes(
    text: str | Iterable[str], fmt: str, source: str, *, limits: TextLimits = DEFAULT_LIMITS
) -> list[ProbeSpec]:
    if fmt == "jsonl":
        return parse_probes_jsonl(text, source, limits=limits)
    if fmt == "xstest":
        return parse_probes_xstest(text, source, limits=limits)
    raise ProbeFormatError(source, [f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}"])


def parse_responses_jsonl(
    text: str | Iterable[str],
    source: str = "responses.jsonl",
    *,
    max_rows: int | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[ResponseSpec]:
    """Responses from JSON Lines, read line by line and at most ``max_rows`` of them."""
    out: list[ResponseSpec] = []
    errors: list[str] = []
    for lineno, obj in _jsonl_records(text, source, max_rows=max_rows, limits=limits):
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


def parse_responses_xstest(
    text: str | Iterable[str],
    source: str = "completions.csv",
    *,
    max_rows: int | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[ResponseSpec]:
    """An XSTest completions CSV: ``v2-17`` answers prompt ``17``; ``final_label`` is kept.
    Read row by row, and at most ``max_rows`` rows."""
    rows = _csv_rows(text, source, ("id", "completion"), max_rows=max_rows, limits=limits)
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


def parse_responses(
    text: str | Iterable[str],
    fmt: str,
    source: str,
    *,
    max_rows: int | None = None,
    limits: TextLimits = DEFAULT_LIMITS,
) -> list[ResponseSpec]:
    """Responses in ``fmt``, from a whole text or a stream of lines; past ``max_rows`` rows
    reading stops (:class:`RowCapExceeded`), and no response is built from a file with a
    field longer than ``limits``."""
    if fmt == "jsonl":
        return parse_responses_jsonl(text, source, max_rows=max_rows, limits=limits)
    if fmt == "xstest":
        return parse_responses_xstest(text, source, max_rows=max_rows, limits=limits)
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
