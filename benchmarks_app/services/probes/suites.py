"""Importing probe suites from JSONL or XSTest files.

Files are parsed by :mod:`scoring.probes.io`, which collects every problem (with its line or
id) before anything is returned, so an import either stores the whole file or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from benchmarks_app.models import Probe, ProbeSuite
from benchmarks_app.services.probes.refusal import (
    RefusalSignalError,
    default_refusal_signal,
    probe_suite_set_refusal_signal,
)
from benchmarks_app.services.uploads import upload_text_limits
from scoring.probes.io import ProbeFormatError, parse_probes


@dataclass(frozen=True)
class SuiteImport:
    suite: ProbeSuite
    created: int
    updated: int


@transaction.atomic
def probe_suite_import(
    *,
    name: str,
    text: str,
    fmt: str,
    source_name: str = "",
    description: str = "",
    refusal_signal: str | None = None,
) -> SuiteImport:
    """Create or extend a suite from a JSONL or XSTest file; all or nothing.

    Probes already in the suite are updated in place (their scored cases keep the snapshot of
    the task and input they were scored with). ``refusal_signal`` sets the suite's signal; a
    new suite given none gets :func:`default_refusal_signal`, an existing one keeps its own.
    """
    name = name.strip()
    if not name:
        raise ProbeFormatError(source_name or "suite", ["field 'suite': a suite name is required"])
    specs = parse_probes(text, fmt, source_name or f"{fmt} file", limits=upload_text_limits())
    suite, created = ProbeSuite.objects.get_or_create(
        name=name, defaults={"description": description, "source": source_name[:300]}
    )
    signal = refusal_signal or (default_refusal_signal() if created else None)
    if signal and signal != suite.refusal_signal:
        try:
            probe_suite_set_refusal_signal(suite=suite, signal=signal)
        except RefusalSignalError as exc:
            raise ProbeFormatError(
                source_name or "suite", [f"field 'refusal_signal': {exc}"]
            ) from exc
    existing = {p.probe_id: p for p in suite.probes.all()}
    new: list[Probe] = []
    changed: list[Probe] = []
    fields = ["category", "severity", "task", "input", "failure_modes", "expected", "metadata"]
    for spec in specs:
        values = {
            "category": spec.category,
            "severity": spec.severity,
            "task": spec.task,
            "input": spec.input,
            "failure_modes": list(spec.failure_modes),
            "expected": spec.expected,
            "metadata": dict(spec.metadata),
        }
        probe = existing.get(spec.probe_id)
        if probe is None:
            new.append(Probe(suite=suite, probe_id=spec.probe_id, **values))
        elif any(getattr(probe, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(probe, k, v)
            changed.append(probe)
    Probe.objects.bulk_create(new, batch_size=1000)
    if changed:
        Probe.objects.bulk_update(changed, fields, batch_size=500)
    return SuiteImport(suite=suite, created=len(new), updated=len(changed))
