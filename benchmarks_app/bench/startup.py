"""Start-up time of a Django process (issue 14), in fresh interpreters.

Figures, each the best of ``REPEATS`` runs with its ratio against the anchors measured before
scikit-learn, scipy and openai were imported where they are used (``ANCHOR_*``):

* ``manage.py check``: the whole command, interpreter start included (wall clock, and the CPU
  time of the process, which a machine busy with other work inflates less);
* ``django.setup()``: timed inside a fresh interpreter, with the heavy libraries it loaded;
* the first request (``GET /`` through Django's test client) after ``django.setup()``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings

REPEATS = 3
CHECK_TARGET_S = 2.0
# Before (issue 14): check 5.6 s, django.setup() 4.6 s, first request 0.64 s.
ANCHOR_CHECK_S = 5.6
ANCHOR_SETUP_S = 4.6
ANCHOR_FIRST_REQUEST_S = 0.64
# Libraries no process should load before it needs them.
HEAVY = ("sklearn", "scipy", "openai")

_CHILD = """
import json, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
started = time.perf_counter()
django.setup()
setup_s = time.perf_counter() - started
loaded = [m for m in json.loads(sys.argv[1]) if m in sys.modules]
first_s = None
try:
    from django.conf import settings
    from django.test import Client
    hosts = [h.lstrip(".") for h in settings.ALLOWED_HOSTS if h and h != "*"]
    started = time.perf_counter()
    status = Client(HTTP_HOST=(hosts or ["localhost"])[0]).get("/").status_code
    first_s = time.perf_counter() - started if status < 400 else None
except Exception:
    pass
print(json.dumps({"setup_s": setup_s, "loaded": loaded, "first_request_s": first_s}))
"""


def _environ() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env.setdefault("DEBUG", "1")
    return env


def _timed(args: list[str]) -> tuple[float, float, str]:
    """Run ``args``; (wall seconds, CPU seconds of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        args,
        cwd=Path(settings.BASE_DIR),
        env=_environ(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def measure(repeats: int = REPEATS) -> dict[str, Any]:
    """Best-of-``repeats`` start-up figures (seconds) and the heavy libraries setup loaded."""
    check = [_timed([sys.executable, "manage.py", "check"])[:2] for _ in range(repeats)]
    children = [
        json.loads(_timed([sys.executable, "-c", _CHILD, json.dumps(HEAVY)])[2].splitlines()[-1])
        for _ in range(repeats)
    ]
    firsts = [c["first_request_s"] for c in children if c["first_request_s"] is not None]
    return {
        "check_s": min(wall for wall, _ in check),
        "check_cpu_s": min(cpu for _, cpu in check),
        "setup_s": min(c["setup_s"] for c in children),
        "first_request_s": min(firsts) if firsts else None,
        "loaded": sorted({m for c in children for m in c["loaded"]}),
    }


def run(out: TextIO) -> None:
    figures = measure()
    check, setup = figures["check_s"], figures["setup_s"]
    out.write(
        f"startup: manage.py check {check:.2f} s (CPU {figures['check_cpu_s']:.2f} s; best of "
        f"{REPEATS}): {check / ANCHOR_CHECK_S:.2f}x the {ANCHOR_CHECK_S} s anchor, target under "
        f"{CHECK_TARGET_S:.0f} s\n"
    )
    loaded = ", ".join(figures["loaded"]) or "none of " + ", ".join(HEAVY)
    out.write(
        f"startup: django.setup() {setup:.2f} s: {setup / ANCHOR_SETUP_S:.2f}x the "
        f"{ANCHOR_SETUP_S} s anchor; heavy libraries loaded by setup: {loaded}\n"
    )
    first = figures["first_request_s"]
    if first is not None:
        out.write(
            f"startup: first request (GET /) {first:.2f} s: "
            f"{first / ANCHOR_FIRST_REQUEST_S:.2f}x the {ANCHOR_FIRST_REQUEST_S} s anchor\n"
        )
    else:
        out.write("startup: first request (GET /) failed; not measured\n")
