from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from benchmarks_app.demo import admin_password_save, audit, checklist, probes, verdicts


class Command(BaseCommand):
    help = (
        "Load the bundled sample data, run all three benchmarks through the queue with the "
        "offline judge, print the leaderboards and create an admin user."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--skip", nargs="*", default=[], choices=["audit", "probes", "checklist"]
        )
        parser.add_argument("--admin-username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        for name, module in (("audit", audit), ("probes", probes), ("checklist", checklist)):
            if name in options["skip"]:
                continue
            self.stdout.write(self.style.MIGRATE_HEADING(f"\n== {name} =="))
            module.run_demo(self.stdout)
        if "audit" not in options["skip"] or "probes" not in options["skip"]:
            self.stdout.write(self.style.MIGRATE_HEADING("\n== curated verdicts =="))
            verdicts.run_demo(
                self.stdout,
                audit="audit" not in options["skip"],
                probes="probes" not in options["skip"],
            )
        self._admin(options["admin_username"])

    def _admin(self, username: str) -> None:
        user_model = get_user_model()
        password = secrets.token_urlsafe(12)
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        admin_password_save(username=username, password=password)
        verb = "Created" if created else "Reset password of"
        self.stdout.write(
            self.style.SUCCESS(f"\n{verb} superuser '{username}' with password: {password}")
        )
