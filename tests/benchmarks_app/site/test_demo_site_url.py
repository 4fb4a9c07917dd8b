"""Links sent from the queue follow the address `make demo HOST=… PORT=…` serves
(issue 26, item 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks_app.management.commands.demo_serve import serve_env

ROOT = Path(__file__).resolve().parents[3]


def test_site_url_follows_host_and_port() -> None:
    assert serve_env("127.0.0.1", "8622", {})["SITE_URL"] == "http://127.0.0.1:8622"
    # A wildcard address is not one to open: links use localhost.
    assert serve_env("0.0.0.0", "8080", {})["SITE_URL"] == "http://localhost:8080"
    assert serve_env("::1", "9000", {})["SITE_URL"] == "http://[::1]:9000"
    # A SITE_URL of one's own (a public name behind a proxy) is kept.
    kept = serve_env("0.0.0.0", "8080", {"SITE_URL": "https://evals.example.org"})
    assert kept["SITE_URL"] == "https://evals.example.org"
    assert serve_env("127.0.0.1", "8622", {})["Q_SYNC"] == "0"


def test_the_served_process_reads_it_as_its_setting() -> None:
    env = serve_env("127.0.0.1", "8622", {"PATH": "/usr/bin:/bin", "DEBUG": "1"})
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
        "django.setup(); from django.conf import settings; print(settings.SITE_URL)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "http://127.0.0.1:8622"
