"""The rush bench's work in the site's own database, run by :class:`._rush_site.Site` as
``python -m benchmarks_app.bench._rush_seed`` with the site's environment: the seed (data and
accounts, through the project's commands and services) and the state of the submitted runs.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path


def seed(args: list[str]) -> None:
    """Data and accounts of the rush, through the project's commands and services."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", required=True)
    parser.add_argument("--loads", type=int, default=1)
    parser.add_argument("--participants", type=int, default=20)
    parser.add_argument("--api-clients", type=int, default=5)
    parser.add_argument("--hostile", type=int, default=3)
    parser.add_argument("--quota-probes", type=int, default=3)
    parser.add_argument("--quota-papers", type=int, default=3)
    parser.add_argument("--no-demo", action="store_true")
    a = parser.parse_args(args)

    import django

    django.setup()
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from benchmarks_app.api.audit_board import AUDIT_ORDERING_COLUMNS
    from benchmarks_app.api.checklist_board import ORDERING_COLUMNS
    from benchmarks_app.api.probes import PROBE_ORDERING_COLUMNS
    from benchmarks_app.demo.audit import AUDIT_DATA
    from benchmarks_app.demo.checklist import CHALLENGE_SLUG
    from benchmarks_app.demo.probes import SUITE, XSTEST
    from benchmarks_app.models import Challenge, EvaluationRun, Probe, Repo, RunStatus
    from benchmarks_app.services.audit import audit_import_path
    from benchmarks_app.services.checklist import (
        checklist_membership_add,
        checklist_team_create,
    )
    from benchmarks_app.services.phases import phase_create
    from benchmarks_app.services.probes import probe_suite_import

    imported = probe_suite_import(
        name=SUITE,
        text=(XSTEST / "xstest_prompts.csv").read_text(encoding="utf-8"),
        fmt="xstest",
        source_name="xstest_prompts.csv",
        description="XSTest v2",
    )
    # Before the demo's entries, so that they land in it: the probe board's open phase, with
    # the daily limit each participant's model runs into.
    phase_create(
        target=imported.suite,
        name="Rush",
        slug="rush",
        starts_at=timezone.now() - timedelta(days=1),
        daily_limit=a.quota_probes,
    )
    if a.no_demo:
        audit_import_path(path=AUDIT_DATA)
    else:
        with open(os.devnull, "w") as devnull:
            call_command("demo_setup", "--skip", "checklist", stdout=devnull)
    challenge, _ = Challenge.objects.get_or_create(
        slug=CHALLENGE_SLUG, defaults={"name": "NeurIPS 2024 checklist assistant"}
    )
    challenge.daily_limit, challenge.total_limit = a.quota_papers, max(a.quota_papers, 20)
    challenge.save(update_fields=["daily_limit", "total_limit"])

    password = secrets.token_urlsafe(12)
    users = get_user_model()
    hashed = users(username="rush-template")
    hashed.set_password(password)  # hashed once: every account has this one password
    loads = []
    for index in range(a.loads):
        roles: dict[str, list[dict[str, str]]] = {}
        for role, count in (
            ("participants", a.participants),
            ("api_clients", a.api_clients),
            ("hostile", a.hostile),
        ):
            accounts = []
            for n in range(count):
                user = users.objects.create(
                    username=f"rush{index}-{role[:4]}-{n}",
                    email=f"rush{index}-{role[:4]}-{n}@example.org",
                    password=hashed.password,
                )
                if role != "api_clients":
                    team = checklist_team_create(challenge=challenge, name=user.username)
                    checklist_membership_add(team=team, user=user)
                token = Token.objects.create(user=user).key
                accounts.append({"username": user.username, "token": token})
            roles[role] = accounts
        loads.append(roles)

    fixture = {
        "password": password,
        "runs": loads,
        "repos": list(Repo.objects.order_by("pk").values_list("project_id", flat=True)[:11]),
        "probe_suite": SUITE,
        "probe_ids": list(
            Probe.objects.filter(suite=imported.suite).values_list("probe_id", flat=True)
        ),
        "ended_runs": list(
            EvaluationRun.objects.filter(status=RunStatus.SUCCEEDED)
            .order_by("pk")
            .values_list("pk", flat=True)[:50]
        ),
        "board_pages": ["/audit/", "/probes/", "/checklist/"],
        "board_api": [
            {"url": "/api/audit/leaderboard/", "ordering": list(AUDIT_ORDERING_COLUMNS)},
            {"url": "/api/probes/leaderboard/", "ordering": list(PROBE_ORDERING_COLUMNS)},
            {"url": "/api/checklist/leaderboard/", "ordering": list(ORDERING_COLUMNS)},
        ],
    }
    Path(a.seed).write_text(json.dumps(fixture))
    # A SQLite template was migrated under another SECRET_KEY: sign the queue's canary with
    # the site's, or its clusters refuse to start.
    from benchmarks_app.services.queue_canary import queue_canary_write

    queue_canary_write(force=True)


def runs_state(path: str) -> dict[str, int]:
    """How the runs listed in the JSON file ``path`` stand: submitted, succeeded, failed,
    cancelled, active."""
    import django

    django.setup()
    from benchmarks_app.models import EvaluationRun, RunStatus
    from benchmarks_app.models.runs import ACTIVE_STATUSES

    ids = json.loads(Path(path).read_text())
    runs = EvaluationRun.objects.filter(pk__in=ids)
    return {
        "submitted": len(set(ids)),
        "succeeded": runs.filter(status=RunStatus.SUCCEEDED).count(),
        "failed": runs.filter(status=RunStatus.FAILED).count(),
        "cancelled": runs.filter(status=RunStatus.CANCELLED).count(),
        "active": runs.filter(status__in=ACTIVE_STATUSES).count(),
    }


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if argv[1:2] == ["--seed"]:
        seed(argv[1:])
    elif argv[1:2] == ["--runs"]:
        print(json.dumps(runs_state(argv[2])))
    else:
        raise SystemExit(
            "usage: python -m benchmarks_app.bench._rush_seed --seed FILE | --runs FILE"
        )


if __name__ == "__main__":
    main(sys.argv)
