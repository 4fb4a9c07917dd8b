"""``qcluster`` for webhook deliveries only: the queue ``WEBHOOK_Q_CLUSTER``.

Deliveries wait on receivers the site does not control, so they have a queue of their own and
this small cluster (``WEBHOOK_WORKERS`` processes) serves it: a slow receiver can hold a webhook
worker, never a judge worker. django-q2 reads which queue a cluster serves from the
environment (``Q_CLUSTER_NAME``) when it is first imported, before any command runs, so this
command starts ``manage.py qcluster`` afresh with it set, in place of itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"


def webhook_qcluster_argv() -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a webhook cluster (``demo_serve`` starts one)."""
    env = {**os.environ, "Q_CLUSTER_NAME": settings.WEBHOOK_Q_CLUSTER}
    return [sys.executable, str(MANAGE), "qcluster"], env


class Command(BaseCommand):
    help = "Starts the django-q2 cluster that sends webhooks (queue WEBHOOK_Q_CLUSTER)."

    def handle(self, *args: Any, **options: Any) -> None:
        argv, env = webhook_qcluster_argv()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(argv[0], argv, env)
