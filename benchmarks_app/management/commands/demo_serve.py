from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from django.core.management.base import BaseCommand

from benchmarks_app.demo import admin_password_line
from benchmarks_app.management.commands.webhook_qcluster import webhook_qcluster_argv


def serve_env(host: str, port: str, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the site and its worker: the queue runs them synchronously no more,
    and links sent from the queue (e-mails, webhooks) point at the address served, unless
    SITE_URL says otherwise."""
    env = {**environ, "Q_SYNC": "0"}
    if not env.get("SITE_URL", "").strip():
        # A wildcard address is where the server listens, not one a browser can open.
        shown = "localhost" if host in ("0.0.0.0", "::", "") else host
        if ":" in shown:
            shown = f"[{shown}]"  # an IPv6 address in a URL
        env["SITE_URL"] = f"http://{shown}:{port}"
    return env


class Command(BaseCommand):
    help = (
        "Serve the site on HOST:PORT with a qcluster beside it, and the small one that sends "
        "webhooks (for `make demo`)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")

    def handle(self, *args: Any, **options: Any) -> None:
        env = serve_env(str(options["host"]), str(options["port"]), dict(os.environ))
        workers = [subprocess.Popen([sys.executable, "manage.py", "qcluster"], env=env)]
        # Webhooks on a queue of their own: a slow receiver never holds a judge worker.
        argv, webhook_env = webhook_qcluster_argv()
        webhook_env = serve_env(str(options["host"]), str(options["port"]), webhook_env)
        workers.append(subprocess.Popen(argv, env=webhook_env))
        address = f"{options['host']}:{options['port']}"
        self.stdout.write(
            self.style.SUCCESS(f"Site: http://{address}/  Admin: http://{address}/admin/")
        )
        # Printed again here: the demo's set-up output, with the password, has scrolled away.
        self.stdout.write(self.style.SUCCESS(admin_password_line()))
        self.stdout.write("Stop with Ctrl-C. Another address: make serve HOST=0.0.0.0 PORT=8080")
        self.stdout.flush()
        try:
            subprocess.call(
                [sys.executable, "manage.py", "runserver", "--noreload", address], env=env
            )
        except KeyboardInterrupt:
            pass
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
