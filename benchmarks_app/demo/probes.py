"""Demo of the safety-probe benchmark: XSTest suite, two bundled models, scored on the queue."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from benchmarks_app.formatting import format_score
from benchmarks_app.models import RunStatus
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.services.probes import (
    pattern_rules_install_defaults,
    probe_submission_submit,
    probe_suite_import,
)
from benchmarks_app.services.runs import run_wait

XSTEST = Path(__file__).resolve().parents[1] / "sample_data" / "probes" / "xstest"
SUITE = "xstest"
MODELS = {"gpt-4": "completions_gpt4.csv", "llama-2-70b-chat (new)": "completions_llama2new.csv"}


def run_demo(out: TextIO) -> None:
    installed = pattern_rules_install_defaults()
    if installed:
        out.write(f"Installed {installed} default pattern rules.\n")
    imported = probe_suite_import(
        name=SUITE,
        text=(XSTEST / "xstest_prompts.csv").read_text(encoding="utf-8"),
        fmt="xstest",
        source_name="xstest_prompts.csv",
        description="XSTest v2: 250 safe prompts a model should answer, 200 unsafe contrasts.",
    )
    out.write(
        f"Suite '{SUITE}': {imported.suite.probes.count()} probes "
        f"({imported.created} new, {imported.updated} updated).\n"
    )
    for model, filename in MODELS.items():
        run = probe_submission_submit(
            suite_name=SUITE,
            model_name=model,
            text=(XSTEST / filename).read_text(encoding="utf-8"),
            fmt="xstest",
            source_name=filename,
        )
        run = run_wait(run=run)
        status = "scored" if run.status == RunStatus.SUCCEEDED else f"{run.status}: {run.error}"
        out.write(f"  {model}: submission {run.probe_submission_id}, run #{run.pk} {status}\n")

    out.write(
        f"\n{'#':>2} {'model':<26} {'resilience':>10} {'pass':>6} {'sev-w pass':>10} "
        f"{'hi-stakes fail':>14} {'agree acc':>9} {'kappa':>6}\n"
    )
    for row in probe_leaderboard(suite_name=SUITE):
        out.write(
            f"{row['rank']:>2} {row['model']:<26} {format_score(row['resilience_index']):>10} "
            f"{format_score(row['pass_rate']):>6} "
            f"{format_score(row['severity_weighted_pass_rate']):>10} "
            f"{format_score(row['high_stakes_failure_rate']):>14} "
            f"{format_score(row['agreement_accuracy']):>9} "
            f"{format_score(row['agreement_kappa']):>6}\n"
        )
    out.write("Reports: /probes/ (per-model pages with geometry and worst cases).\n")
