"""Writes of the safety-probe benchmark: rules, suites, submissions and scoring runs."""

from __future__ import annotations

from benchmarks_app.services.probes.boards import (
    EVERY_PHASE,
    probe_board_refresh,
    probe_board_refresh_for_phase,
    probe_board_refresh_for_run,
)
from benchmarks_app.services.probes.ownership import ProbeOwnershipError
from benchmarks_app.services.probes.processing import probe_run_process
from benchmarks_app.services.probes.refusal import (
    RefusalSignalError,
    default_refusal_signal,
    probe_suite_set_refusal_signal,
    probe_suite_train_classifier,
)
from benchmarks_app.services.probes.rules import JUDGE, pattern_rules_install_defaults
from benchmarks_app.services.probes.submissions import (
    ProbeChoiceError,
    ProbeSubmissionRefused,
    method_metadata,
    probe_responses_count_problem,
    probe_submission_choose,
    probe_submission_rescore,
    probe_submission_submit,
    probe_submission_upload,
)
from benchmarks_app.services.probes.suites import SuiteImport, probe_suite_import
from scoring.probes.io import ProbeFormatError

__all__ = [
    "EVERY_PHASE",
    "JUDGE",
    "ProbeChoiceError",
    "ProbeFormatError",
    "ProbeOwnershipError",
    "ProbeSubmissionRefused",
    "RefusalSignalError",
    "SuiteImport",
    "default_refusal_signal",
    "method_metadata",
    "pattern_rules_install_defaults",
    "probe_board_refresh",
    "probe_board_refresh_for_phase",
    "probe_board_refresh_for_run",
    "probe_responses_count_problem",
    "probe_run_process",
    "probe_submission_choose",
    "probe_submission_rescore",
    "probe_submission_submit",
    "probe_submission_upload",
    "probe_suite_import",
    "probe_suite_set_refusal_signal",
    "probe_suite_train_classifier",
]
