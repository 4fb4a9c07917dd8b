"""Issue 23's six hostile uploads sent to a served site (``make bench BENCH=hostile``).

The site is served the way ``make serve`` serves it (``manage.py runserver --noreload``, one
process) but with DEBUG off, on a temporary SQLite database seeded with a user and API token,
the XSTest probe suite and the bundled audit release. Each upload of
:mod:`benchmarks_app.bench.hostile_files` is sent through the API; per row the HTTP status, the
seconds to the answer and how far the serving process's peak resident memory (``VmHWM``) has
grown since before the first upload are printed. Papers are read in child processes bounded
by their own memory limit (``PDF_PARSE_MEMORY_MB``), which ``VmHWM`` of the server does not
include.

Done when (issue 23): every answer within ``ANSWER_S``, none a 5xx, the long title refused
(4xx) and the peak grown by less than ``PEAK_GROWTH_MIB``. A 5xx answer makes the benchmark
fail (``SystemExit(1)``, after every row is printed); the other criteria are reported.
Before the issue's fixes: 135 s, 28 s, 17 s, HTTP 500, 21 s, 202; +1,012 MiB.

``python -m benchmarks_app.bench.hostile`` runs it without ``run_benchmarks``; set
``HOSTILE_BENCH_PORT`` to serve on a given port (default: a free one).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from benchmarks_app.bench import hostile_files

ROOT = Path(__file__).resolve().parents[2]
ANSWER_S = 15.0
PEAK_GROWTH_MIB = 300
# Longest wait for one answer: well past ANSWER_S, so that a slow answer is measured, not lost.
REQUEST_TIMEOUT_S = 300
START_TIMEOUT_S = 120


@dataclass(frozen=True)
class Row:
    name: str
    status: int
    seconds: float
    peak_growth_mib: float
    answer: str


def _env(tmp: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}
    return {
        **keep,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": f"sqlite:///{tmp / 'site.sqlite3'}",
        "MEDIA_ROOT": str(tmp / "media"),
        "STATIC_ROOT": str(tmp / "static"),
        "Q_SYNC": "0",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def _seed() -> dict[str, str]:
    """In the served site's database: a user with a token, the probe suite, the audit data."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from benchmarks_app.demo.audit import AUDIT_DATA
    from benchmarks_app.demo.probes import SUITE, XSTEST
    from benchmarks_app.selectors.visibility import visible_repos
    from benchmarks_app.services.audit import audit_import_path
    from benchmarks_app.services.probes import probe_suite_import

    user = get_user_model().objects.create_user("hostile", password=secrets.token_urlsafe(16))
    token = Token.objects.create(user=user).key
    probe_suite_import(
        name=SUITE,
        text=(XSTEST / "xstest_prompts.csv").read_text(encoding="utf-8"),
        fmt="xstest",
        source_name="xstest_prompts.csv",
        description="XSTest v2",
    )
    audit_import_path(path=AUDIT_DATA)
    repo = visible_repos(user).order_by("pk").first()
    if repo is None:
        raise SystemExit("the audit data imported no repo visible to a participant")
    return {"token": token, "suite": SUITE, "repo": repo.project_id}


def _free_port() -> int:
    wanted = os.environ.get("HOSTILE_BENCH_PORT")
    if wanted:
        return int(wanted)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _peak_kib(pid: int) -> int:
    """The process's peak resident memory (VmHWM), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc (Linux only)")


def _multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = secrets.token_hex(16)
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    for name, (filename, data) in files.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            + data
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _send(url: str, token: str, body: bytes, content_type: str) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as answer:
            return answer.status, answer.read(600).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(600).decode(errors="replace")


def _requests(base: str, seeded: dict[str, str]) -> list[tuple[str, str, bytes, str]]:
    """Each row's (label, URL, body, content type), made before any clock starts."""

    def paper(label: str, name: str, make: Callable[[], bytes]) -> tuple[str, str, bytes, str]:
        body, kind = _multipart({}, {"file": (f"{name}.pdf", make())})
        return label, f"{base}/api/checklist/extract/", body, kind

    probes, probes_kind = _multipart(
        {"suite": seeded["suite"], "model": "hostile-model", "format": "xstest"},
        {"file": ("responses.csv", hostile_files.probe_csv())},
    )
    return [
        paper("1 tiny operators (PDF)", "tiny-operators", hostile_files.tiny_operators_pdf),
        paper("2 shared stream (PDF)", "shared-stream", hostile_files.shared_stream_pdf),
        paper("3a content bomb (PDF)", "content-bomb", hostile_files.content_bomb_pdf),
        paper("3b 5,000 pages (PDF)", "many-pages", hostile_files.many_pages_pdf),
        paper("4 nested TJ (PDF)", "nested-tj", hostile_files.nested_array_pdf),
        ("5 probe CSV, 1,000,000 rows", f"{base}/api/probes/submissions/", probes, probes_kind),
        (
            "6 audit title, 15,000,000 chars",
            f"{base}/api/audit/repos/{seeded['repo']}/results/?scanner=hostile-scanner",
            json.dumps(hostile_files.audit_results()).encode(),
            "application/json",
        ),
    ]


def _wait_up(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the site exited with status {server.returncode}:\n{tail}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{base}/api/", timeout=5) as answer,
        ):
            if answer.status == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"the site did not answer within {START_TIMEOUT_S} s")


def measure(out: TextIO) -> list[Row]:
    """Serve a fresh site, send the six rows, return what each answered."""
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="hostile-bench-") as name:
        tmp = Path(name)
        env = _env(tmp)
        for command in (["migrate"], ["collectstatic"]):
            subprocess.run(
                [python, "manage.py", *command, "--noinput", "-v", "0"],
                cwd=ROOT,
                env=env,
                check=True,
            )
        seeded = json.loads(
            subprocess.run(
                [python, "-m", "benchmarks_app.bench.hostile", "--seed"],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        log_path = tmp / "site.log"
        log = log_path.open("wb")
        server = subprocess.Popen(
            [python, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_up(base, server, log_path)
            baseline = _peak_kib(server.pid)
            out.write(f"site pid {server.pid} on {base}, DEBUG off; peak RSS before: "
                      f"{baseline / 1024:.0f} MiB\n")  # fmt: skip
            out.write(f"{'row':<34} {'HTTP':>4} {'seconds':>8} {'peak +MiB':>9}  answer\n")
            rows = []
            for label, url, body, kind in _requests(base, seeded):
                started = time.perf_counter()
                status, text = _send(url, seeded["token"], body, kind)
                seconds = time.perf_counter() - started
                growth = (_peak_kib(server.pid) - baseline) / 1024
                row = Row(label, status, seconds, growth, " ".join(text.split())[:140])
                rows.append(row)
                out.write(f"{label:<34} {status:>4} {seconds:>8.2f} {growth:>9.0f}  {row.answer}\n")
                out.flush()
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            log.close()
    return rows


def verdict(rows: list[Row]) -> list[str]:
    """The issue's "done when" criteria that the rows miss (empty: all met)."""
    missed = [f"{r.name}: {r.seconds:.1f} s" for r in rows if r.seconds > ANSWER_S]
    missed += [f"{r.name}: HTTP {r.status}" for r in rows if r.status >= 500]
    title = next(r for r in rows if r.name.startswith("6 "))
    if not 400 <= title.status < 500:
        missed.append(f"the long title was not refused (HTTP {title.status})")
    peak = max(r.peak_growth_mib for r in rows)
    if peak >= PEAK_GROWTH_MIB:
        missed.append(f"peak memory grew by {peak:.0f} MiB (limit {PEAK_GROWTH_MIB})")
    return missed


def run(out: TextIO) -> None:
    rows = measure(out)
    missed = verdict(rows)
    out.write(
        "done when (issue 23): "
        + ("all met\n" if not missed else "NOT met: " + "; ".join(missed) + "\n")
    )
    if any(r.status >= 500 for r in rows):
        out.flush()
        raise SystemExit(1)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if argv[1:] == ["--seed"]:
        print(json.dumps(_seed()))
        return
    run(sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
