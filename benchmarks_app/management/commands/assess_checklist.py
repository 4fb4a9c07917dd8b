"""Assess one paper's checklist with a chosen judge: maintainers check a judge, no web upload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import NoReverseMatch, reverse

from benchmarks_app.models import (
    AssessmentStatus,
    ChecklistAnswer,
    ChecklistAssessment,
    EvaluationRun,
    RunStatus,
)
from benchmarks_app.selectors.checklist import checklist_run_votes, default_challenge
from benchmarks_app.selectors.run_health import run_end_text
from benchmarks_app.selectors.runs import run_judge_usage
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    PaperUpload,
    checklist_paper_assess_for_maintainers,
)
from benchmarks_app.services.checklist.maintainers import MAINTAINERS_TEAM
from benchmarks_app.services.queue_canary import queue_key_problem
from benchmarks_app.services.runs import run_wait
from benchmarks_app.services.uploads import upload_too_large
from scoring.judges.usage import JudgeUsage

EXCERPT_CHARS = 100


def _verdict(assessment: ChecklistAssessment | None) -> str:
    if assessment is None:
        return "pending"
    if assessment.status == AssessmentStatus.JUDGE_FAILED:
        return "failed"
    return "correct" if assessment.correct == 1 else "incorrect"


def _excerpt(text: str, width: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def _path(name: str, pk: int) -> str | None:
    try:
        return reverse(name, args=[pk])
    except NoReverseMatch:
        return None


def run_report(run: EvaluationRun) -> dict[str, Any]:
    """The run's verdicts in question order and its score, as the command prints them.

    An answer's verdict is its latest decided assessment; a judge failure shows only when
    the answer has no decided one (a resumed run keeps its failed attempts on record).
    """
    submission = run.checklist_submission
    if submission is None:
        raise CommandError(f"Run #{run.pk} is not a checklist run.")
    decided: dict[int, ChecklistAssessment] = {}
    for a in ChecklistAssessment.objects.filter(run=run).order_by("created_at", "pk"):
        if a.status == AssessmentStatus.JUDGE_FAILED:
            decided.setdefault(a.answer_id, a)
        else:
            decided[a.answer_id] = a
    answers = (
        ChecklistAnswer.objects.filter(paper__submission=submission)
        .select_related("paper", "question")
        .order_by("paper__kind", "question__number")
    )
    paper = submission.papers.first()
    score = getattr(run, "checklist_score", None)
    return {
        "run": run.pk,
        "status": run.status,
        "judge": run.judge,
        "judge_label": run.judge_label,
        "error": run.error,
        "judge_usage": run_judge_usage(run=run).as_dict(),
        "votes": checklist_run_votes(run=run),
        "submission": submission.pk,
        "team": submission.team.name,
        "challenge": submission.challenge.slug,
        "kind": submission.kind,
        "paper": {
            "file": paper.original_name if paper else "",
            "title": paper.title if paper else "",
            "body_words": paper.body_words if paper else 0,
            "body_truncated": paper.body_truncated if paper else False,
        },
        "verdicts": [
            {
                "paper": a.paper.kind,
                "number": a.question.number,
                "title": a.question.printed_title,
                "answer": a.answer,
                "verdict": _verdict(decided.get(a.pk)),
                "feedback": decided[a.pk].feedback if a.pk in decided else "",
            }
            for a in answers
        ],
        "scores": None
        if score is None
        else {"c_g": score.c_g, "c_a": score.c_a, "c_t": score.c_t, "r": score.r, "s": score.s},
    }


class Command(BaseCommand):
    help = (
        "Assess a paper's NeurIPS checklist (PDF, .tex or .zip of LaTeX sources) with a chosen "
        f"judge, as a Genuine-only entry of the staff team {MAINTAINERS_TEAM!r} (no "
        "participant's quota is used; the entry is ranked on the challenge's leaderboard with "
        "S = 0, as every Genuine-only entry). With --wait, process the run here when no worker "
        "takes it and print each question's verdict and the scores."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paper", help="A .pdf, .tex or .zip file")
        parser.add_argument(
            "--judge",
            required=True,
            help="judge record NAME (judge_add, admin), or offline | openai[:MODEL] "
            "(MODEL in JUDGE_MODELS)",
        )
        parser.add_argument("--wait", action="store_true", help="wait for the run and report it")
        parser.add_argument("--challenge", help="Challenge slug (default: the open one)")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        # Tasks signed with a key no running cluster shares would be dropped unread.
        if problem := queue_key_problem():
            raise CommandError(f"refusing to queue a run: {problem}")
        path = Path(options["paper"])
        if not path.exists():
            raise CommandError(f"{path}: no such file")
        if not path.is_file():
            raise CommandError(f"{path}: not a file")
        too_large = upload_too_large(path.stat().st_size, str(path))
        if too_large:
            raise CommandError(too_large)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{path}: cannot read the file ({exc.strerror or exc})") from exc
        slug = options.get("challenge")
        challenge = default_challenge(slug)
        if challenge is None:
            raise CommandError(
                f"No challenge with slug {slug!r}."
                if slug
                else "No challenge found: create one in the admin first."
            )
        try:
            run = checklist_paper_assess_for_maintainers(
                challenge=challenge,
                upload=PaperUpload(name=path.name, data=data),
                judge=options["judge"],
            )
        except ChecklistSubmissionError as exc:
            raise CommandError(exc.message) from exc
        if not options["wait"]:
            self._queued(run, as_json=options["format"] == "json")
            return
        # Why the run waits goes to stderr: stdout may be the JSON report.
        run = run_wait(run=run, on_event=self.stderr.write)
        report = run_report(run)
        if options["format"] == "json":
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            self._text(report)
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"Run #{run.pk} {run.status}: {run_end_text(run)}")

    def _queued(self, run: EvaluationRun, *, as_json: bool) -> None:
        # With a synchronous queue (Q_SYNC) the run has already ended by now.
        run.refresh_from_db()
        pages = [
            p
            for p in (
                _path("runs:detail", run.pk),
                _path("checklist:submission-detail", run.checklist_submission_id or 0),
            )
            if p
        ]
        if as_json:
            payload = {
                "run": run.pk,
                "status": run.status,
                "judge": run.judge,
                "judge_label": run.judge_label,
                "submission": run.checklist_submission_id,
                "pages": pages,
            }
            self.stdout.write(json.dumps(payload, indent=2))
            return
        self.stdout.write(
            f"Queued run #{run.pk} ({run.status}) with judge {run.judge_label} for submission "
            f"#{run.checklist_submission_id} of team {MAINTAINERS_TEAM!r}."
        )
        self.stdout.write(
            "A worker (python manage.py qcluster) processes it; staff follow it at "
            f"{' and '.join(pages) or 'the admin'}. With --wait, this command processes the "
            "run itself when no worker takes it, and prints the verdicts and scores."
        )

    def _text(self, report: dict[str, Any]) -> None:
        paper = report["paper"]
        cut = " (cut)" if paper["body_truncated"] else ""
        self.stdout.write(
            f"{paper['file']}: {paper['title'] or '(untitled)'} · {paper['body_words']} words{cut}"
        )
        self.stdout.write(
            f"Run #{report['run']} {report['status']} · judge {report['judge_label']} · submission "
            f"#{report['submission']} of {report['team']!r} in {report['challenge']}"
        )
        self.stdout.write(JudgeUsage.from_dict(report["judge_usage"]).line())
        if votes := report.get("votes"):
            self.stdout.write(
                f"Votes: {votes['policy']} (CHECKLIST_VOTES: {votes['text']}): {votes['votes']} "
                f"for {votes['answers']} answers, {votes['asked_again']} asked again"
            )
        width = max((len(v["title"]) for v in report["verdicts"]), default=0)
        for v in report["verdicts"]:
            self.stdout.write(
                f"{v['number']:>2}. {v['title']:<{width}}  {v['answer']:<4}  {v['verdict']:<9}  "
                f"{_excerpt(v['feedback'])}"
            )
        scores = report["scores"]
        if scores is None:
            self.stdout.write("No score: not every answer has a verdict.")
            return
        correct = sum(1 for v in report["verdicts"] if v["verdict"] == "correct")
        self.stdout.write(
            f"C_G = {scores['c_g']:.3f} ({correct} of {len(report['verdicts'])} answers correct)"
        )
        # The command files Genuine-only entries: the other scores exist, fixed by definition.
        self.stdout.write(
            f"Genuine-only paper: C_A = {scores['c_a']:.0f}, C_T = {scores['c_t']:.0f}, "
            f"R = {scores['r']:.0f}, so S = {scores['s']:.0f} (they need the adversarial and "
            "truth-adversarial papers)."
        )
