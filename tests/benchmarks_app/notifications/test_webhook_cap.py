"""The per-user webhook cap holds when one user creates many at once (issue 23, row 8).

PostgreSQL only: SQLite takes its write lock when a transaction begins (``transaction_mode``
IMMEDIATE in settings), which serialises creations by itself; and the in-memory SQLite test
database answers concurrent threads with "database table is locked" instead of waiting.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import override_settings

from benchmarks_app.models import Webhook
from benchmarks_app.services.webhooks import WebhookError, webhook_create
from tests.factories.common import UserFactory

PARALLEL = 16
CAP = 10


def _create_in_parallel(owner_id: int) -> tuple[int, list[str]]:
    """``PARALLEL`` threads create a webhook each, all starting together; (created, errors)."""
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.get(pk=owner_id)
    start = threading.Barrier(PARALLEL)
    created: list[int] = []
    refused: list[str] = []
    unexpected: list[str] = []

    def create(i: int) -> None:
        try:
            start.wait(timeout=30)
            webhook = webhook_create(owner=owner, url=f"http://127.0.0.1:9/hook/{i}")
            created.append(webhook.pk)
        except WebhookError as exc:
            refused.append(exc.message)
        except Exception as exc:  # e.g. a lock timeout: reported, and fails the test
            unexpected.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(PARALLEL)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not unexpected, unexpected
    assert len(created) + len(refused) == PARALLEL
    assert all("already have 10 webhooks" in message for message in refused)
    return len(created), refused


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(WEBHOOKS_PER_USER=CAP)
def test_parallel_creations_stop_at_the_cap_on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL)")
    user = UserFactory.create()
    created, refused = _create_in_parallel(user.pk)
    assert created == CAP
    assert len(refused) == PARALLEL - CAP
    assert Webhook.objects.filter(owner=user).count() == CAP
