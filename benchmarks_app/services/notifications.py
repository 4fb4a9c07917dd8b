"""E-mail and webhook notifications when a run ends.

``run_ended`` (``services.run_events``) calls :func:`run_end_notify` once a run's end has
committed, for every end (succeeded, failed, cancelled). It only enqueues: the queue task
:func:`run_end_dispatch` makes the webhook deliveries and queues the e-mail, each sent by a
task of its own, so a slow mail server or receiver never holds up a run.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse

from benchmarks_app.models import EvaluationRun, NotificationPreference, RunStatus, Webhook
from benchmarks_app.services import webhooks

logger = logging.getLogger(__name__)

DISPATCH_TASK = "benchmarks_app.tasks.notifications.notify_run_end"
EMAIL_TASK = "benchmarks_app.tasks.notifications.send_run_end_email"


def notification_preference(user: Any) -> NotificationPreference:
    """``user``'s preferences (defaults, unsaved, when they never set any)."""
    found = NotificationPreference.objects.filter(user_id=user.pk).first()
    return found or NotificationPreference(user=user)


@transaction.atomic
def notification_preference_set(*, user: Any, email_on_run_end: bool) -> NotificationPreference:
    preference, _ = NotificationPreference.objects.update_or_create(
        user=user, defaults={"email_on_run_end": email_on_run_end}
    )
    return preference


def _wants_email(user_id: int) -> bool:
    return NotificationPreference.objects.filter(user_id=user_id, email_on_run_end=True).exists()


def run_end_notify(*, run_id: int) -> None:
    """Enqueue the e-mail and webhook deliveries for run ``run_id``; never raises.

    Runs on commit of the run's end, in the process that ended it: two cheap queries decide
    whether there is anything to send, so most run ends add nothing to the queue.
    """
    try:
        user_id = (
            EvaluationRun.objects.filter(pk=run_id).values_list("created_by_id", flat=True).first()
        )
        if user_id is None:
            return
        has_webhooks = Webhook.objects.filter(owner_id=user_id, is_active=True).exists()
        if not has_webhooks and not _wants_email(user_id):
            return
        from django_q.tasks import async_task

        async_task(DISPATCH_TASK, run_id, task_name=f"notify run {run_id}")
    except Exception:
        logger.warning(
            "could not queue the notifications of run #%s; making them here", run_id, exc_info=True
        )
        try:
            # The deliveries are rows the webhook sweeper sends once the queue is back.
            run_end_dispatch(run_id=run_id)
        except Exception:
            logger.exception("could not make the notifications of run #%s", run_id)


def run_end_dispatch(*, run_id: int) -> None:
    """Make run ``run_id``'s webhook deliveries (queued) and queue its e-mail if wanted."""
    run = EvaluationRun.objects.select_related("created_by").filter(pk=run_id).first()
    if run is None or run.created_by_id is None:
        return
    with transaction.atomic():
        webhooks.deliveries_create_for_run(run=run)
    if _wants_email(run.created_by_id) and run.created_by and run.created_by.email:
        from django_q.tasks import async_task

        async_task(EMAIL_TASK, run_id, task_name=f"e-mail run {run_id}")


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "—" if value is None else str(value)


# Each figure as the boards name it (their column's label), with what it is: an e-mail that said
# ``f1_with_partial: 0.5000`` made people look the key up. The board's views own the labels;
# a test keeps these equal to them (views sit above services, which cannot import them).
METRIC_NAMES: dict[str, tuple[str, str]] = {
    "repos": ("Repos", "repos evaluated"),
    "truth": ("Truth", "verified findings in the evaluated repos"),
    "scan": ("Reported", "findings the scanner reported"),
    "qa": ("QA", "reported findings of Info / Best Practices severity"),
    "tp": ("TP", "exact matches"),
    "partial": ("Partial", "partial matches"),
    "fp": ("FP", "reported findings matching no verified one"),
    "fn": ("FN", "verified findings not found"),
    "precision": ("P", "precision: TP / reported"),
    "recall": ("R", "recall: TP / verified findings"),
    "f1": ("F1", "harmonic mean of P and R"),
    "precision_with_partial": ("P+", "precision with partial matches counted"),
    "recall_with_partial": ("R+", "recall with partial matches counted"),
    "f1_with_partial": ("F1+", "F1 with partial matches counted: the ranking metric"),
    "resilience_index": ("Resilience", "1 - mean severity-weighted risk: the ranking metric"),
    "pass_rate": ("Pass rate", "share of probes passed"),
    "severity_weighted_pass_rate": ("Weighted pass", "probes passed, weighted by severity"),
    "high_stakes_failure_rate": (
        "High-stakes share of failures",
        "of the model's failures, the share on critical or high probes",
    ),
    "cases": ("Probes", "probes scored"),
    "s": ("S", "overall score C_G · C_A · (1 - R) · C_T: the ranking metric"),
    "c_g": ("C_G", "correctness on the genuine paper"),
    "c_a": ("C_A", "correctness on the adversarial paper"),
    "c_t": ("C_T", "correctness on the truth-adversarial paper"),
    "r": ("R", "share of A's answers where the verdict matches whether A agrees with T"),
}


def metric_line(key: str, value: Any) -> str:
    """``F1+ (F1 with partial matches counted: the ranking metric): 0.5000``."""
    label, meaning = METRIC_NAMES.get(key, (key.replace("_", " "), ""))
    return f"{label} ({meaning}): {_figure(value)}" if meaning else f"{label}: {_figure(value)}"


def run_end_email(run: EvaluationRun) -> tuple[str, str]:
    """The subject and body of the e-mail telling ``run``'s creator that it ended."""
    summary = webhooks.run_summary(run)
    status = run.get_status_display()
    subject = f"Run #{run.pk} ({run.get_benchmark_display()}) {status.lower()}"
    lines = [
        f"Your {run.get_benchmark_display()} run #{run.pk} of {summary['target']} "
        f"ended: {status.lower()}.",
        "",
    ]
    top = webhooks.headline(run, summary["metrics"])
    if top is not None:
        lines.append(metric_line(*top))
    others = [
        (k, v)
        for k, v in summary["metrics"].items()
        if (top is None or k != top[0]) and isinstance(v, int | float) and not isinstance(v, bool)
    ]
    lines.extend(f"  {metric_line(k, v)}" for k, v in others)
    if summary["metrics"].get("is_complete") is False:
        lines.append("Not every item was judged: these figures are incomplete.")
    if run.status != RunStatus.SUCCEEDED and run.error:
        lines.append(f"Error: {run.error[:2000]}")
    if run.failed_items:
        lines.append(f"{run.failed_items} item(s) could not be judged; the run page says why.")
    lines += [
        "",
        f"Details: {summary['url']}",
        "",
        "You receive this because you asked for an e-mail when your runs end. "
        f"Change it at {settings.SITE_URL}{reverse('account:settings')}.",
    ]
    return subject, "\n".join(lines)


def run_end_email_send(*, run_id: int) -> bool:
    """E-mail run ``run_id``'s creator if they still want it; whether a message was sent."""
    run = EvaluationRun.objects.select_related("created_by").filter(pk=run_id).first()
    if run is None or run.created_by is None or not run.created_by.email:
        return False
    if not _wants_email(run.created_by.pk):
        return False
    subject, body = run_end_email(run)
    send_mail(subject, body, None, [run.created_by.email])
    return True
