"""Webhooks: registration, the run-end payload, and signed deliveries retried with back-off.

A delivery is one (webhook, run, event) row, unique, so a run's end never makes two. Each
attempt is claimed in a short transaction (only a pending delivery is sent, so a delivered one
is never sent again), POSTed outside it, then recorded; a failed attempt schedules the next one
on the queue (django-q2 ``schedule`` with ``next_run``) until ``WEBHOOK_MAX_ATTEMPTS``. The
signature scheme is :mod:`scoring.webhooks`.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from benchmarks_app.models import (
    Benchmark,
    DeliveryStatus,
    EvaluationRun,
    Webhook,
    WebhookDelivery,
)
from benchmarks_app.models.notifications import new_webhook_secret
from benchmarks_app.selectors.run_metrics import run_metrics
from benchmarks_app.selectors.visibility import visible_webhooks
from benchmarks_app.services import webhook_http
from benchmarks_app.services.webhook_http import AddrInfo, Answer
from scoring import webhooks as signing

logger = logging.getLogger(__name__)

RUN_FINISHED = "run.finished"
DELIVER_TASK = "benchmarks_app.tasks.notifications.deliver_webhook"
# Waits before the 2nd, 3rd, ... attempt; the last one repeats.
RETRY_DELAYS_S = (30, 120, 600, 3600, 21600)
# What is kept of a receiver's answer (for the admin and the deliveries endpoint).
ANSWER_KEEP = 500
USER_AGENT = "evalplatform-webhooks/1"


class WebhookError(ValueError):
    """A refused webhook: ``field`` names the input, the message says what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --- URLs --------------------------------------------------------------------------------


def _checked_addresses(host: str, port: int) -> list[AddrInfo]:
    """Every address of ``host``, resolved once; ``WebhookError`` when it does not resolve or
    (unless ``WEBHOOK_ALLOW_PRIVATE``) when any of them is not public."""
    try:
        infos = webhook_http.resolve(host, port)
    except webhook_http.ResolveError as exc:
        raise WebhookError("url", str(exc)) from exc
    if not settings.WEBHOOK_ALLOW_PRIVATE:
        private = webhook_http.first_private(infos)
        if private is not None:
            raise WebhookError(
                "url",
                f"resolves to {private}, a private, loopback or reserved address; "
                "webhooks must point to a public address",
            )
    return infos


def webhook_url_check(url: str) -> str:
    """``url`` stripped, or ``WebhookError`` naming what is wrong with it.

    http/https only, with a host and no credentials. Unless ``WEBHOOK_ALLOW_PRIVATE`` is on
    (DEBUG and tests), a host that resolves to a private, loopback, link-local or otherwise
    non-public address is refused: a webhook must not make the site POST into its own network.
    The addresses are checked again at each attempt, and the attempt connects to the very
    addresses checked then (``_target``).
    """
    url, host, port = _url_parts(url)
    if not settings.WEBHOOK_ALLOW_PRIVATE:
        _checked_addresses(host, port)
    return url


def _target(url: str) -> tuple[str, list[AddrInfo]]:
    """``url`` checked, and the addresses its host resolved to (each one checked)."""
    url, host, port = _url_parts(url)
    return url, _checked_addresses(host, port)


def _url_parts(url: str) -> tuple[str, str, int]:
    """``url`` stripped, its host and port; ``WebhookError`` when it is malformed."""
    url = (url or "").strip()
    if not url:
        raise WebhookError("url", "is required")
    if len(url) > 500:
        raise WebhookError("url", "is longer than 500 characters")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise WebhookError("url", "must not contain spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise WebhookError("url", "must start with http:// or https://")
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError as exc:
        raise WebhookError("url", "has an invalid port") from exc
    host = parts.hostname
    if not host:
        raise WebhookError("url", "has no host name")
    if parts.username is not None or parts.password is not None:
        raise WebhookError("url", "must not contain a user name or password")
    return url, host, port


# --- Registration ------------------------------------------------------------------------


def webhooks_of(user: Any) -> QuerySet[Webhook]:
    return visible_webhooks(user)


@transaction.atomic
def webhook_create(*, owner: Any, url: str) -> Webhook:
    """A new active webhook of ``owner`` for ``url`` (checked), with a fresh secret.

    The owner's row is locked first: locking their webhooks locks nothing while they have
    none, and parallel creations all counted zero. (SQLite serialises writing transactions.)
    """
    url = webhook_url_check(url)
    list(
        get_user_model()
        .objects.select_for_update(no_key=True)
        .filter(pk=owner.pk)
        .values_list("pk")
    )
    if Webhook.objects.filter(owner_id=owner.pk).count() >= settings.WEBHOOKS_PER_USER:
        raise WebhookError(
            "url", f"you already have {settings.WEBHOOKS_PER_USER} webhooks; delete one first"
        )
    return Webhook.objects.create(owner=owner, url=url)


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    # Deliveries go with it (cascade): nothing is left to retry.
    webhook.delete()


@transaction.atomic
def webhook_rotate_secret(*, webhook: Webhook) -> Webhook:
    """A new secret; attempts from now on are signed with it (pending retries included)."""
    webhook.secret = new_webhook_secret()
    webhook.save(update_fields=["secret", "updated_at"])
    return webhook


# --- The run-end payload -----------------------------------------------------------------


def run_url(run: EvaluationRun) -> str:
    return f"{settings.SITE_URL}{reverse('runs:detail', args=[run.pk])}"


def run_metrics_summary(run: EvaluationRun) -> dict[str, Any]:
    """The run's main figures, as ``/api/runs/<id>/`` gives them (empty when it has none)."""
    return run_metrics(run=run) or {}


# The figure each benchmark ranks by: the one an e-mail's subject line can carry.
HEADLINE_METRIC: dict[str, str] = {
    Benchmark.AUDIT: "f1_with_partial",
    Benchmark.PROBES: "resilience_index",
    Benchmark.CHECKLIST: "s",
}


def headline(run: EvaluationRun, metrics: dict[str, Any]) -> tuple[str, Any] | None:
    name = HEADLINE_METRIC.get(run.benchmark)
    if name is None or name not in metrics:
        return None
    return name, metrics[name]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def run_summary(run: EvaluationRun) -> dict[str, Any]:
    """The ``run`` object of a run-end payload."""
    return {
        "id": run.pk,
        "benchmark": str(run.benchmark),
        "status": str(run.status),
        "target": run.target_label,
        "target_id": run.scanner_id or run.probe_submission_id or run.checklist_submission_id,
        "error": run.error,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "metrics": run_metrics_summary(run),
        "url": run_url(run),
    }


# --- Deliveries --------------------------------------------------------------------------


def _enqueue(delivery_id: int, expected_attempts: int | None) -> None:
    from django_q.tasks import async_task

    # The webhook queue: a slow receiver holds a webhook worker, never a judge worker.
    async_task(
        DELIVER_TASK,
        delivery_id,
        expected_attempts,
        task_name=f"webhook {delivery_id}",
        cluster=settings.WEBHOOK_Q_CLUSTER,
    )


def _schedule(delivery_id: int, expected_attempts: int, when: datetime) -> None:
    from django_q.models import Schedule
    from django_q.tasks import schedule

    # ONCE with repeats=-1: django-q2 deletes the schedule after it has run. A lost one is
    # made up for by ``deliveries_sweep``.
    try:
        schedule(
            DELIVER_TASK,
            delivery_id,
            expected_attempts,
            name=f"webhook {delivery_id} attempt {expected_attempts + 1}",
            schedule_type=Schedule.ONCE,
            next_run=when,
            # Only the webhook cluster's scheduler turns it into a task, on its own queue.
            cluster=settings.WEBHOOK_Q_CLUSTER,
        )
    except Exception:
        logger.warning("could not schedule webhook delivery %s", delivery_id, exc_info=True)


def deliveries_create_for_run(*, run: EvaluationRun, event: str = RUN_FINISHED) -> list[int]:
    """One pending delivery per active webhook of the run's creator; ids of the new ones.

    Idempotent: a second call for the same run and event creates nothing (the unique
    constraint), so a repeated notification task sends nothing twice.
    """
    if run.created_by_id is None:
        return []
    created: list[int] = []
    summary = run_summary(run)
    for webhook in Webhook.objects.filter(owner_id=run.created_by_id, is_active=True):
        if WebhookDelivery.objects.filter(webhook=webhook, run=run, event=event).exists():
            continue
        try:
            with transaction.atomic():
                delivery = WebhookDelivery.objects.create(
                    webhook=webhook, run=run, event=event, next_attempt_at=timezone.now()
                )
                delivery.payload = {"event": event, "run": summary, "delivery": delivery.pk}
                delivery.save(update_fields=["payload"])
        except IntegrityError:
            continue  # made meanwhile by a concurrent call
        created.append(delivery.pk)
    for pk in created:
        transaction.on_commit(partial(_enqueue, pk, 0))
    return created


def _post(url: str, infos: list[AddrInfo], body: bytes, headers: dict[str, str]) -> Answer:
    """One POST to the addresses ``infos``, bounded in time and size; redirects are not
    followed (one could point into the site's own network): a 3xx is a failed attempt."""
    answer = webhook_http.post(
        url,
        infos,
        body,
        headers,
        deadline_s=float(settings.WEBHOOK_TIMEOUT_S),
        max_bytes=int(settings.WEBHOOK_MAX_ANSWER_BYTES),
        keep=ANSWER_KEEP,
    )
    if answer.status_code is not None and not answer.ok:
        text = answer.body.decode("utf-8", "replace")
        error = f"HTTP {answer.status_code}: {text}".strip()[:ANSWER_KEEP]
        return Answer(answer.status_code, error, answer.body)
    return answer


def delivery_body(delivery: WebhookDelivery, *, sent_at: datetime) -> bytes:
    payload = {**delivery.payload, "delivery": delivery.pk, "sent_at": sent_at.isoformat()}
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _send(delivery: WebhookDelivery) -> Answer:
    webhook = delivery.webhook
    # Resolved and checked again at each attempt (the name may resolve elsewhere than at
    # registration), and the POST goes to those addresses: no second look-up to rebind.
    try:
        url, infos = _target(webhook.url)
    except WebhookError as exc:
        return Answer(None, f"refused: url {exc.message}")
    sent_at = timezone.now()
    timestamp = str(int(time.time()))
    body = delivery_body(delivery, sent_at=sent_at)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.EVENT_HEADER: delivery.event,
        signing.DELIVERY_HEADER: str(delivery.pk),
        signing.TIMESTAMP_HEADER: timestamp,
        signing.SIGNATURE_HEADER: signing.sign(webhook.secret, timestamp, body),
    }
    return _post(url, infos, body, headers)


def retry_delay_s(attempts_made: int) -> int:
    """The wait after attempt ``attempts_made`` (1, 2, ...) before the next one."""
    return RETRY_DELAYS_S[min(max(attempts_made, 1), len(RETRY_DELAYS_S)) - 1]


def _claim(delivery_id: int, expected_attempts: int | None) -> WebhookDelivery | None:
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .select_related("webhook")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status != DeliveryStatus.PENDING:
            return None  # delivered, given up, or gone: never sent again
        if expected_attempts is not None and delivery.attempts != expected_attempts:
            return None  # another attempt ran since this one was scheduled
        if not delivery.webhook.is_active:
            delivery.status = DeliveryStatus.FAILED
            delivery.last_error = "the webhook was deactivated"
            delivery.next_attempt_at = None
            delivery.save(update_fields=["status", "last_error", "next_attempt_at"])
            return None
        delivery.attempts += 1
        # A lease: if this attempt's worker dies, ``deliveries_sweep`` tries again after it.
        delivery.next_attempt_at = timezone.now() + _attempt_lease()
        delivery.save(update_fields=["attempts", "next_attempt_at"])
        return delivery


def _attempt_lease() -> timedelta:
    return timedelta(seconds=2 * float(settings.WEBHOOK_TIMEOUT_S) + 60)


def delivery_attempt(
    *, delivery_id: int, expected_attempts: int | None = None
) -> WebhookDelivery | None:
    """Send pending delivery ``delivery_id`` once; record the answer; schedule a retry.

    ``expected_attempts``: the attempts made when this attempt was scheduled; if another
    attempt has run since, this one does nothing. None: attempt now regardless ("retry now").
    Returns the delivery as recorded, or None when nothing was sent.
    """
    delivery = _claim(delivery_id, expected_attempts)
    if delivery is None:
        return None
    try:
        answer = _send(delivery)
    except Exception as exc:  # recorded and retried like a receiver's failure
        logger.exception("webhook delivery %s: the attempt failed", delivery.pk)
        answer = Answer(None, f"{type(exc).__name__}: {exc}"[:ANSWER_KEEP])
    now = timezone.now()
    delivery.last_status_code = answer.status_code
    delivery.last_error = answer.error
    retry_at: datetime | None = None
    if answer.ok:
        delivery.status = DeliveryStatus.DELIVERED
        delivery.delivered_at = now
    elif delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        delivery.status = DeliveryStatus.FAILED
    else:
        retry_at = now + timedelta(seconds=retry_delay_s(delivery.attempts))
    delivery.next_attempt_at = retry_at
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=delivery.status,
            last_status_code=delivery.last_status_code,
            last_error=delivery.last_error,
            delivered_at=delivery.delivered_at,
            next_attempt_at=retry_at,
        )
        if retry_at is not None:
            transaction.on_commit(partial(_schedule, delivery.pk, delivery.attempts, retry_at))
    if not answer.ok:
        logger.info(
            "webhook delivery %s attempt %s failed: %s",
            delivery.pk,
            delivery.attempts,
            answer.error or answer.status_code,
        )
    return delivery


@transaction.atomic
def delivery_retry_now(*, delivery: WebhookDelivery) -> bool:
    """Queue one more attempt of ``delivery`` now (a given-up one too); False if delivered."""
    locked = WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
    if locked.status == DeliveryStatus.DELIVERED:
        return False
    locked.status = DeliveryStatus.PENDING
    locked.next_attempt_at = timezone.now()
    locked.save(update_fields=["status", "next_attempt_at"])
    transaction.on_commit(lambda: _enqueue(locked.pk, None))
    return True


# A due attempt whose schedule has not fired this long after its time is sent again.
SWEEP_GRACE = timedelta(minutes=5)


def deliveries_sweep(*, now: datetime | None = None) -> list[int]:
    """Queue the pending deliveries whose next attempt is overdue: its schedule was lost, or
    the worker of its last attempt died (the attempt's lease ran out)."""
    cutoff = (now or timezone.now()) - SWEEP_GRACE
    due = list(
        WebhookDelivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lt=cutoff
        ).values_list("pk", "attempts")
    )
    for pk, attempts in due:
        _enqueue(pk, attempts)
    return [pk for pk, _ in due]


def deliveries_of(webhook: Webhook) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(webhook=webhook).order_by("-created_at", "-id")
