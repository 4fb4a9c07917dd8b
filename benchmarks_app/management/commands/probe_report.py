from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks_app.selectors.probe_boards import ProbeReportNotFound, probe_leaderboard
from benchmarks_app.selectors.probes import probe_report, probe_submission_for_model
from scoring.probes.metrics import board_markdown
from scoring.probes.report import report_markdown

BOARD_FIELDS = (
    "suite",
    "suite_version",
    "model",
    "rank",
    "rank_low",
    "rank_high",
    "tied",
    "paired_rank_low",
    "paired_rank_high",
    "paired_tied",
    "resilience_index",
    "pass_rate",
    "evaluated",
    "submission_id",
    "run_id",
)


def resolve_submission(options: dict[str, Any]) -> int:
    """``--submission ID`` or ``--suite NAME --model NAME`` (that model's latest scored one)."""
    if options.get("submission") is not None:
        return int(options["submission"])
    if not (options.get("suite") and options.get("model")):
        raise CommandError("give --submission ID, or --suite NAME and --model NAME")
    try:
        return probe_submission_for_model(suite_name=options["suite"], model_name=options["model"])
    except ProbeReportNotFound as exc:
        raise CommandError(str(exc)) from exc


def add_target_arguments(parser: CommandParser) -> None:
    parser.add_argument("--submission", type=int)
    parser.add_argument("--suite")
    parser.add_argument("--model")


def board_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The leaderboard rows as printed: the interval as ``resilience_index_ci: [low, high]``."""
    out = []
    for row in rows:
        ci = None if row["ci_low"] is None else [row["ci_low"], row["ci_high"]]
        out.append({**{k: row[k] for k in BOARD_FIELDS}, "resilience_index_ci": ci})
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def board_text(rows: list[dict[str, Any]]) -> str:
    """One Markdown table per board (suite and suite version)."""
    if not rows:
        return "No scored probe submission yet."
    lines: list[str] = []
    board: tuple[str, str] | None = None
    for row in board_rows(rows):
        if (row["suite"], row["suite_version"]) != board:
            board = (row["suite"], row["suite_version"])
            version = row["suite_version"] or "unversioned"
            lines += [
                *([""] if lines else []),
                f"## {row['suite']} (suite version {version})",
                "",
                "| # | Model | Resilience | 95% CI | Rank range | Tied | Pass rate | Probes |",
                "|---|---|---|---|---|---|---|---|",
            ]
        ci = row["resilience_index_ci"]
        interval = "—" if ci is None else f"{ci[0]:.3f}\u2013{ci[1]:.3f}"
        low, high = row["rank_low"], row["rank_high"]
        span = "—" if low is None else str(low) if low == high else f"{low}\u2013{high}"
        lines.append(
            f"| {row['rank']} | {row['model']} | {_cell(row['resilience_index'])} | "
            f"{interval} | {span} | "
            f"{'≈ tied' if row['tied'] else ''} | {_cell(row['pass_rate'])} | "
            f"{_cell(row['evaluated'])} |"
        )
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Print (or write) the report of a scored probe submission as JSON or Markdown, or with "
        "--leaderboard the boards (one per suite version) with intervals and rank ranges."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_target_arguments(parser)
        parser.add_argument(
            "--leaderboard",
            action="store_true",
            help="Print the leaderboard (every suite, or --suite) instead of one report.",
        )
        parser.add_argument(
            "--suite-version",
            help="With --leaderboard: only this suite version ('' for unversioned).",
        )
        parser.add_argument("--format", choices=["json", "md"], default="json")
        parser.add_argument("--out", type=Path, help="Write to this file instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["leaderboard"]:
            if options.get("model") or options.get("submission") is not None:
                raise CommandError("--leaderboard takes --suite and --suite-version, not a model")
            rows = probe_leaderboard(
                suite_name=options.get("suite"), version=options["suite_version"]
            )
            if options["format"] == "md":
                text = board_text(rows)
            else:
                text = json.dumps({"rows": board_rows(rows)}, indent=2, ensure_ascii=False)
            self._emit(text, options)
            return
        submission_id = resolve_submission(options)
        try:
            report = probe_report(submission_id=submission_id)
        except ProbeReportNotFound as exc:
            raise CommandError(str(exc)) from exc
        if options["format"] == "md":
            text = report_markdown(report) + "\n" + board_markdown(report)
        else:
            text = json.dumps(report, indent=2, ensure_ascii=False)
        self._emit(text, options)

    def _emit(self, text: str, options: dict[str, Any]) -> None:
        if options["out"]:
            options["out"].write_text(text + "\n", encoding="utf-8")
            self.stdout.write(f"Wrote {options['out']}")
        else:
            self.stdout.write(text)
