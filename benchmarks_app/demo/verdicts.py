"""``make demo``: the first curated verdicts (recorded o4-mini audit verdicts, XSTest human
labels) and every judge's agreement with them."""

from __future__ import annotations

from typing import TextIO

from django.core.management.base import OutputWrapper

from benchmarks_app.demo import SAMPLE_DATA
from benchmarks_app.demo.probes import MODELS, SUITE, XSTEST
from benchmarks_app.selectors.judge_agreement import judges_agreement
from benchmarks_app.selectors.judge_agreement_table import agreement_table
from benchmarks_app.services.curated_verdicts import (
    curated_verdicts_import_audit_recorded,
    curated_verdicts_import_xstest,
)


def run_demo(out: TextIO | OutputWrapper, *, audit: bool = True, probes: bool = True) -> None:
    if audit:
        report = curated_verdicts_import_audit_recorded(
            folder=SAMPLE_DATA / "audit" / "recorded",
            scanner_name="baseline",
            source_name="recorded o4-mini verdicts (sample_data/audit/recorded)",
        )
        out.write(f"Recorded o4-mini audit verdicts: {report.summary()}\n")
    if probes:
        for filename in MODELS.values():
            report = curated_verdicts_import_xstest(
                suite_name=SUITE,
                text=(XSTEST / filename).read_text(encoding="utf-8"),
                source_name=f"XSTest human labels ({filename})",
            )
            out.write(f"XSTest human labels of {filename}: {report.summary()}\n")
    out.write(agreement_table(judges_agreement()))
    out.write("Review queue: /admin/benchmarks_app/curatedverdict/review/\n")
