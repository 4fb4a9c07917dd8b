"""A separate Django process for the tests of limits shared between processes.

Started by :class:`tests.benchmarks_app.limits.processes.Worker` with the test's database and
the production cache (``TEST_SHARED_CACHE=1``). It sets Django up, prints ``ready``, then runs
its action once per ``go`` line read from stdin and prints one JSON line per run:

* ``mail EMAIL CLIENT N``: N requests for an account e-mail; how many were allowed.
* ``api N``: N anonymous ``GET /api/runs/`` from one address; their status codes.
* ``hold N``: takes N reader slots, holding them until the next line (or the end of stdin).
* ``extract PDF``: one ``POST /api/checklist/extract/`` of the file by a logged-in user.
* ``refused USER SUITE N``: N responses files that are not JSON, posted by USER to
  ``/api/probes/submissions/`` for SUITE; their status codes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import django


def _mail(email: str, client: str, count: str) -> dict[str, Any]:
    from benchmarks_app.services.accounts import account_mail_allowance_take

    allowed = sum(
        account_mail_allowance_take(email=email, client=client) for _ in range(int(count))
    )
    return {"allowed": allowed}


def _api(count: str) -> dict[str, Any]:
    from django.test import Client

    client = Client(REMOTE_ADDR="203.0.113.9")
    return {"codes": [client.get("/api/runs/").status_code for _ in range(int(count))]}


def _extract(path: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(username=f"reader-{os.getpid()}")
    client = Client()
    client.force_login(user)
    data = Path(path).read_bytes()
    started = time.monotonic()
    answer = client.post(
        "/api/checklist/extract/", {"file": SimpleUploadedFile(Path(path).name, data)}
    )
    return {
        "status": answer.status_code,
        "retry_after": answer.get("Retry-After"),
        "body": answer.json(),
        "elapsed_s": time.monotonic() - started,
    }


def _refused(username: str, suite: str, count: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    codes = []
    for _ in range(int(count)):
        upload = SimpleUploadedFile("r.jsonl", b"{not json\n")
        fields = {"suite": suite, "model": "m", "file": upload}
        codes.append(client.post("/api/probes/submissions/", fields).status_code)
    return {"codes": codes}


ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "mail": _mail,
    "api": _api,
    "extract": _extract,
    "refused": _refused,
}


def main() -> None:
    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host, "testserver", is allowed
    import fcntl

    from django.core.management import call_command

    # The shared cache's table (the test database was built with the per-process cache);
    # one worker at a time creates it.
    with open(os.environ["WORKER_SETUP_LOCK"], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        call_command("createcachetable", verbosity=0)
    action, *args = sys.argv[1:]
    print("ready", flush=True)
    with ExitStack() as held:
        for line in sys.stdin:
            if line.strip() != "go":
                break
            if action == "hold":
                from benchmarks_app.services.reader_slots import reader_slot_hold

                for _ in range(int(args[0])):
                    held.enter_context(reader_slot_hold())
                outcome: dict[str, Any] = {"held": int(args[0])}
            else:
                run: Callable[..., dict[str, Any]] = ACTIONS[action]
                outcome = run(*args)
            print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
