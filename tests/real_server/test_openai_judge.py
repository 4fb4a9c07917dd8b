"""The ``openai`` judge against a real OpenAI-compatible server, through the whole stack.

A small local model answers slowly and often badly: these tests do not check verdicts. They
check what a real server exposes and the fake one in the other tests does not: no HTTP errors
caused by what the platform sends, no "Event loop is closed" from clients outliving their
loop, every answer within JUDGE_MAX_ANSWER_TOKENS, every answer parsed or recorded with a
reason, most answers parsed (a run that judged little does not pass, however clean its
protocol), and a run that succeeds or fails only for the causes support.ALLOWED_CAUSES names
(the model's answers), with a one-line cause saying what to change.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

from django.db.models import Count, Sum

from benchmarks_app.models import (
    AuditTruthResult,
    ChecklistAnswer,
    ChecklistAssessment,
    JudgeCall,
    Repo,
    Scanner,
    ScanResult,
)
from benchmarks_app.services.audit import audit_import_path, audit_run_create
from benchmarks_app.services.checklist import (
    PaperUpload,
    checklist_submission_assess,
    checklist_submission_create,
)
from benchmarks_app.services.runs import run_wait
from tests.factories.checklist import MembershipFactory
from tests.real_server.support import (
    AUDIT_ITERATIONS,
    MIN_CACHED_SHARE,
    MIN_CALLS_FOR_SHARE,
    REAL_LLM,
    assert_no_problems,
    report,
    summarize,
)

pytestmark = REAL_LLM

SAMPLE = Path(__file__).resolve().parents[2] / "benchmarks_app" / "sample_data"


def _log_text(caplog: Any) -> str:
    return "\n".join(r.getMessage() for r in caplog.records)


def test_audit_two_smallest_repos(real_llm_settings: Any, real_llm_model: str, caplog: Any) -> None:
    caplog.set_level(logging.WARNING)
    audit_import_path(path=SAMPLE / "audit")
    scanner = Scanner.objects.get(name="baseline")
    findings = {
        r.repo_id: r.findings.count() for r in ScanResult.objects.current().filter(scanner=scanner)
    }
    truths = dict(
        Repo.objects.filter(pk__in=findings)
        .annotate(n=Count("truth_findings"))
        .values_list("pk", "n")
    )
    candidates = list(Repo.objects.filter(pk__in=findings))
    named = {p.strip() for p in os.environ.get("REAL_LLM_AUDIT_REPOS", "").split(",") if p.strip()}
    if named:
        repos = [r for r in candidates if r.project_id in named]
    else:
        # Smallest = least judge work: every truth finding is compared with every scan
        # finding, so the prompt tokens grow with truths x scan findings. (Fewest truths alone
        # would pick loopfi, whose 52 scan findings take a CPU model ten minutes.)
        repos = sorted(
            candidates, key=lambda r: (truths[r.pk] * findings[r.pk], truths[r.pk], r.project_id)
        )[:2]
    assert repos and (named or len(repos) == 2)

    run = audit_run_create(
        scanner=scanner,
        repos=repos,
        judge="openai",
        model=real_llm_model,
        iterations=AUDIT_ITERATIONS,
    )
    run = run_wait(run=run)
    gc.collect()  # finalizers of leftover clients run now, inside this test

    results = list(AuditTruthResult.objects.filter(run=run))
    report(
        "audit",
        summarize(
            run,
            repos={r.project_id: (truths[r.pk], findings[r.pk]) for r in repos},
            outcomes=dict(Counter(r.outcome for r in results)),
            judge_config=run.judge_config,
        ),
    )
    texts = [f"{r.explanation}\n{r.notes}\n{json.dumps(r.votes)}" for r in results]
    assert_no_problems(run, texts, _log_text(caplog))
    assert run.progress_total == sum(truths[r.pk] for r in repos)
    # The prompt lists the repo's scan findings first, as they are whatever matching took, and
    # the truth finding last (version 3): most of every prompt is a prefix the server has in a
    # slot.
    sent = JudgeCall.objects.filter(run=run).exclude(status__in=["cached", "pending", "lost"])
    totals = sent.aggregate(prompt=Sum("tokens_in"), cached=Sum("tokens_cached"))
    prompt_tokens, cached_tokens = int(totals["prompt"] or 0), int(totals["cached"] or 0)
    assert prompt_tokens > 0, "the server reported no prompt tokens"
    share = cached_tokens / prompt_tokens
    if sent.count() < MIN_CALLS_FOR_SHARE:
        # A 135M model's run often ends after a few calls (answers cut or outside the schema
        # twice fail the run, and a failed run stops its siblings): then every batch's first,
        # cold call dominates, and the share says nothing about the prompt's layout (measured
        # here: 43-44% over 4-6 calls). The figure is still in artifacts/real_llm/audit.json.
        return
    assert share >= MIN_CACHED_SHARE, (
        f"{cached_tokens:,} of {prompt_tokens:,} prompt tokens ({share:.0%}) came from the "
        f"server's cache, under REAL_LLM_MIN_CACHED_SHARE={MIN_CACHED_SHARE:.0%}"
    )


def test_checklist_genuine_paper(real_llm_settings: Any, real_llm_model: str, caplog: Any) -> None:
    caplog.set_level(logging.WARNING)
    paper = SAMPLE / "checklist" / "demo" / "genuine.tex"
    member: Any = MembershipFactory()
    submission = checklist_submission_create(
        team=member.team,
        user=member.user,
        files={"G": PaperUpload(name=paper.name, data=paper.read_bytes())},
    )
    answers = ChecklistAnswer.objects.filter(paper__submission=submission)
    assert answers.count() == 15
    judged = answers.exclude(answer="TODO").count()
    # More answers than one batch holds: the run goes through several batches.
    assert judged > real_llm_settings.JUDGE_BATCH_SIZE

    run = checklist_submission_assess(
        submission=submission, user=member.user, judge=f"openai:{real_llm_model}"
    )
    run = run_wait(run=run)
    gc.collect()
    submission.refresh_from_db()

    assessments = list(ChecklistAssessment.objects.filter(run=run))
    report(
        "checklist",
        summarize(
            run,
            answers_judged=judged,
            batches=-(-judged // real_llm_settings.JUDGE_BATCH_SIZE),
            paper_words=submission.papers.get().body_words,
            assessments=dict(Counter(a.status for a in assessments)),
            submission_status=submission.status,
            submission_error=submission.error,
            judge_config=run.judge_config,
        ),
    )
    texts = [submission.error] + [f"{a.feedback}\n{json.dumps(a.votes)}" for a in assessments]
    assert_no_problems(run, texts, _log_text(caplog))
    if run.status == "succeeded":
        assert {a.answer_id for a in assessments if a.status != "judge_failed"} == set(
            answers.values_list("pk", flat=True)
        )
