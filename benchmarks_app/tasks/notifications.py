"""Queue entry points of run-end notifications (e-mail, webhook deliveries)."""

from __future__ import annotations

from benchmarks_app.services.notifications import run_end_dispatch, run_end_email_send
from benchmarks_app.services.webhooks import deliveries_sweep, delivery_attempt


def notify_run_end(run_id: int) -> None:
    """Make the webhook deliveries of a run that ended and queue its e-mail."""
    run_end_dispatch(run_id=run_id)


def send_run_end_email(run_id: int) -> bool:
    return run_end_email_send(run_id=run_id)


def deliver_webhook(delivery_id: int, expected_attempts: int | None = None) -> str:
    """One attempt of a webhook delivery; a failure schedules the next one."""
    delivery = delivery_attempt(delivery_id=delivery_id, expected_attempts=expected_attempts)
    return "skipped" if delivery is None else delivery.status


def sweep_webhook_deliveries() -> str:
    """Queue overdue deliveries whose retry schedule was lost."""
    return f"{len(deliveries_sweep())} overdue delivery(ies) queued"
