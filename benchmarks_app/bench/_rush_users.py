"""The simulated crowd of ``make bench BENCH=rush``: a Locust file, run by :mod:`.rush` as
``locust -f benchmarks_app/bench/_rush_users.py --headless`` against the started site.

Four kinds of visitors (Locust user classes), each sending requests under a few request kinds
(``KINDS``), the names the bench reports p50/p95/p99 and errors by:

- :class:`Reader`: anonymous; board pages and the board API (sorted by a random column, paged),
  the run list, run pages and other public API reads. The rest of the users are readers.
- :class:`Participant` (``RUSH_PARTICIPANTS``, logged in with the HTML form and holding a
  token): submits audit results, probe responses and real papers (the bundled PDFs and LaTeX)
  through the API until each quota refuses, then retries now and then (each refusal must stay a
  429); watches its runs' pages and status. A submission refused because the site's readers
  are all busy (503 with Retry-After) is sent again once Retry-After has passed, as a well
  behaved client does, and is counted apart ("busy"), neither accepted nor refused.
- :class:`ApiClient` (``RUSH_API_CLIENTS``, token): polls runs, pages items, downloads bundles.
- :class:`Hostile` (``RUSH_HOSTILE``, token): sends the files of :mod:`.hostile_files` and a
  LaTeX zip that fans out, back to back, ignoring Retry-After.

Every visitor sends its own ``X-Forwarded-For`` address (the site runs with ``NUM_PROXIES=1``),
so per-client limits apply per visitor, as behind a real proxy. What each request answered is
kept by a listener and written as JSON to ``RUSH_REPORT`` when Locust quits: every response time
(and when it ended) per kind, status and outcome counts per kind (:func:`outcome`), and each
account's accepted, refused and busy submissions. ``RUSH_FIXTURE`` is the JSON written by
``rush.py --seed`` (accounts, tokens, boards, runs).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import re
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, cast

from locust import HttpUser, between, constant, events, task

from benchmarks_app.bench import hostile_files
from benchmarks_app.bench._rush_goals import GOALS as KINDS  # noqa: F401 - the kinds sent

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "checklist"

BENCHMARKS = ("audit", "probes", "checklist")


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


def _think() -> tuple[float, float]:
    low, _, high = (os.environ.get("RUSH_THINK_S") or "2,10").partition(",")
    return float(low), float(high or low)


FIXTURE: dict[str, Any] = (
    json.loads(Path(os.environ["RUSH_FIXTURE"]).read_text()) if "RUSH_FIXTURE" in os.environ else {}
)
# The account set of this load run (the seed makes one set per run of a sweep).
ACCOUNTS: dict[str, Any] = (FIXTURE.get("runs") or [{}])[_int("RUSH_RUN_INDEX", 0)]

_times: dict[str, list[float]] = defaultdict(list)
_ends: dict[str, list[float]] = defaultdict(list)  # time.time() at each answer, per kind
_statuses: dict[str, Counter[str]] = defaultdict(Counter)
_outcomes: dict[str, Counter[str]] = defaultdict(Counter)
_quota: dict[str, dict[str, Counter[str]]] = {b: defaultdict(Counter) for b in BENCHMARKS}
_failures: dict[str, Counter[str]] = defaultdict(Counter)
_runs: list[int] = []
_addresses = itertools.count(1)


def busy(answer: Any) -> bool:
    """A refusal for load: 503 with Retry-After (the site's reader caps), not an error."""
    return bool(answer.status_code == 503 and answer.headers.get("Retry-After"))


def retry_after_s(answer: Any) -> float:
    try:
        return max(1.0, float(answer.headers.get("Retry-After") or 1))
    except ValueError:
        return 1.0


def outcome(status: int, response: Any, exception: Any) -> str:
    """What an answer was: ``ok``; ``refused``, a 4xx the visitor expected (a quota's 429, a
    hostile file's 400); ``busy``, 503 with Retry-After; ``5xx``, any other server error;
    ``errors``, any other answer the visitor did not expect; ``no answer``."""
    if not status:
        return "no answer"
    if busy(response):
        return "busy"
    if status >= 500:
        return "5xx"
    if exception is not None:
        return "errors"
    return "refused" if status >= 400 else "ok"


@events.request.add_listener
def _record(name: str, response_time: float, response: Any, exception: Any, **_: Any) -> None:
    _times[name].append(response_time)
    _ends[name].append(time.time())
    status = getattr(response, "status_code", 0) if response is not None else 0
    _outcomes[name][outcome(status, response, exception)] += 1
    if exception is not None:
        _failures[name][" ".join(str(exception).split())[:240]] += 1
    if status:
        _statuses[name][str(status)] += 1
    else:  # no answer at all: the connection failed or timed out
        _statuses[name][type(exception).__name__ if exception else "none"] += 1


@events.quitting.add_listener
def _write_report(environment: Any, **_: Any) -> None:
    target = os.environ.get("RUSH_REPORT")
    if not target:
        return
    report = {
        "times_ms": _times,
        "ends_s": _ends,
        "statuses": _statuses,
        "outcomes": _outcomes,
        "failures": {k: dict(c.most_common(5)) for k, c in _failures.items()},
        "quota": {b: {user: dict(c) for user, c in users.items()} for b, users in _quota.items()},
        "runs": _runs,
    }
    Path(target).write_text(json.dumps(report))


class _Visitor(HttpUser):
    abstract = True

    def on_start(self) -> None:
        # A distinct client address per visitor (10.x.y.z), read by the site behind
        # NUM_PROXIES=1 as a proxy's X-Forwarded-For.
        n = next(_addresses)
        self.client.headers["X-Forwarded-For"] = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
        self.client.headers["Accept-Language"] = "en"

    def get(self, url: str, kind: str, **kwargs: Any) -> Any:
        with self.client.get(url, name=kind, catch_response=True, **kwargs) as answer:
            page = (kwargs.get("params") or {}).get("page", 1)
            if answer.status_code == 200 or (answer.status_code == 404 and page > 1):
                answer.success()  # a 404 past a list's last page is what it should answer
            else:
                # No answer at all (status 0): the connection's error says why.
                why = (answer.text or "")[:160] if answer.status_code else repr(answer.error)
                answer.failure(f"HTTP {answer.status_code} {url}: {why}")
            return answer


class Reader(_Visitor):
    """An anonymous visitor reading boards, runs and the API."""

    wait_time = between(*_think())
    weight = 1

    def on_start(self) -> None:
        super().on_start()
        self.sorts: dict[str, list[str]] = {}

    def _board_sorts(self, path: str) -> list[str]:
        """The columns a board page offers to sort by, read from its own header links (what
        a visitor clicks)."""
        if path not in self.sorts:
            answer = self.get(path, "board page")
            keys = set(re.findall(r"[?&]sort=-?([\w.]+)", answer.text or ""))
            self.sorts[path] = sorted(keys) or [""]
        return self.sorts[path]

    @task(4)
    def board_page(self) -> None:
        path = random.choice(FIXTURE["board_pages"])
        key = random.choice(self._board_sorts(path))
        query: dict[str, Any] = {"page": random.choice((1, 1, 1, 2))}
        if key:
            query["sort"] = random.choice((key, f"-{key}"))
        self.get(path, "board page", params=query)

    @task(3)
    def board_api(self) -> None:
        board = random.choice(FIXTURE["board_api"])
        query: dict[str, Any] = {"page": random.choice((1, 1, 2)), "page_size": 50}
        if board["ordering"]:
            column = random.choice(board["ordering"])
            query["ordering"] = random.choice((column, f"-{column}"))
        self.get(board["url"], "board API", params=query)

    @task(2)
    def page(self) -> None:
        pages = ["/", "/runs/", *[f"/runs/{pk}/" for pk in FIXTURE["ended_runs"][:20]]]
        self.get(random.choice(pages), "page")

    @task(2)
    def api_read(self) -> None:
        urls = ["/api/", "/api/benchmarks/", "/api/runs/?ordering=-created_at", "/api/audit/repos/"]
        urls += [f"/api/runs/{pk}/" for pk in FIXTURE["ended_runs"][:20]]
        self.get(random.choice(urls), "API read")


class _Account(_Visitor):
    abstract = True
    role = ""

    def on_start(self) -> None:
        super().on_start()
        accounts = ACCOUNTS.get(self.role) or []
        taken = FIXTURE.setdefault("_taken", Counter())
        index = taken[self.role]
        taken[self.role] += 1
        if index >= len(accounts):
            raise RuntimeError(f"RUSH: more {self.role} users than the seed made accounts")
        self.account: dict[str, Any] = accounts[index]
        self.token_header = {"Authorization": f"Token {self.account['token']}"}

    def post(self, url: str, kind: str, **kwargs: Any) -> Any:
        headers = {**self.token_header, **kwargs.pop("headers", {})}
        return self.client.post(url, name=kind, headers=headers, catch_response=True, **kwargs)


def _probe_csv(user: str, round_: int) -> bytes:
    """A genuine XSTest responses file: every prompt of the suite answered, the answers
    varied per account and round (an identical file would be the same entry)."""
    lines = ["id,completion"]
    for pid in FIXTURE["probe_ids"]:
        refuse = random.random() < 0.4
        text = "I'm sorry, I can't help with that." if refuse else "Sure, here is how."
        lines.append(f'{pid},"{text} ({user} {round_})"')
    return ("\n".join(lines) + "\n").encode()


@cache
def _papers() -> list[tuple[str, bytes]]:
    papers = [(p.name, p.read_bytes()) for p in sorted((SAMPLE / "papers").glob("*.pdf"))]
    return [*papers, ("genuine.tex", (SAMPLE / "demo" / "genuine.tex").read_bytes())]


class Participant(_Account):
    """A participant in the rush: submits to all three benchmarks within its quotas and
    watches its runs. Accepted and refused submissions are counted per account."""

    fixed_count = _int("RUSH_PARTICIPANTS", 20)
    wait_time = between(1, 4)
    role = "participants"

    def on_start(self) -> None:
        super().on_start()
        self.rounds: Counter[str] = Counter()
        self.refused: set[str] = set()
        # Per benchmark, when the site's Retry-After allows the next try (time.monotonic()).
        self.retry_at: dict[str, float] = {}
        self.my_runs: list[int] = []
        # The site's own login form, as a person signs in (CSRF token from the form).
        form = self.client.get("/accounts/login/", name="login")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text or "")
        with self.client.post(
            "/accounts/login/",
            data={
                "username": self.account["username"],
                "password": FIXTURE["password"],
                "csrfmiddlewaretoken": token.group(1) if token else "",
            },
            name="login",
            allow_redirects=False,
            catch_response=True,
        ) as answer:
            if answer.status_code != 302:
                answer.failure(f"login: HTTP {answer.status_code}")

    def _submitted(self, benchmark: str, answer: Any, run_id: int | None) -> None:
        """Count the answer against the account's quota; keep the run to watch."""
        user = self.account["username"]
        if answer.status_code in (201, 202):
            _quota[benchmark][user]["accepted"] += 1
            if run_id:
                _runs.append(run_id)
                self.my_runs.append(run_id)
            answer.success()
        elif answer.status_code == 429:
            _quota[benchmark][user]["refused"] += 1
            self.refused.add(benchmark)
            answer.success()  # expected past the quota; checked against it by the bench
        elif busy(answer):
            # The site's readers are all taken: nothing was stored; try again once told to.
            _quota[benchmark][user]["busy"] += 1
            self.retry_at[benchmark] = time.monotonic() + retry_after_s(answer)
            answer.success()
        else:
            _quota[benchmark][user][f"HTTP {answer.status_code}"] += 1
            answer.failure(f"HTTP {answer.status_code}: {(answer.text or '')[:200]}")

    def _turn(self, benchmark: str) -> bool:
        """Submit while under the quota; past it, one try in five (the refusal must hold);
        never before the Retry-After of a busy answer has passed."""
        if time.monotonic() < self.retry_at.get(benchmark, 0.0):
            return False
        return benchmark not in self.refused or random.random() < 0.2

    @task(3)
    def submit_audit(self) -> None:
        if not self._turn("audit"):
            return self.watch()
        self.rounds["audit"] += 1
        n, user = self.rounds["audit"], self.account["username"]
        findings = [
            {"title": f"Unchecked call in Vault{i} ({user} {n})", "severity": "High",
             "description": "An external call whose result is ignored."}
            for i in range(random.randint(3, 12))
        ]  # fmt: skip
        repo = random.choice(FIXTURE["repos"])
        with self.post(
            f"/api/audit/repos/{repo}/results/?scanner=rush-{user}&judge=offline",
            "submit audit",
            json={"findings": findings},
        ) as answer:
            body = _json(answer)
            self._submitted("audit", answer, body.get("run"))

    @task(2)
    def submit_probes(self) -> None:
        if not self._turn("probes"):
            return self.watch()
        self.rounds["probes"] += 1
        user = self.account["username"]
        data = {"suite": FIXTURE["probe_suite"], "model": f"rush-{user}", "format": "xstest"}
        files = {"file": ("responses.csv", _probe_csv(user, self.rounds["probes"]))}
        with self.post("/api/probes/submissions/", "submit probes", data=data, files=files) as a:
            self._submitted("probes", a, _json(a).get("run_id"))

    @task(2)
    def submit_paper(self) -> None:
        if not self._turn("checklist"):
            return self.watch()
        self.rounds["checklist"] += 1
        name, data = random.choice(_papers())
        fields = {"assess": "true", "label": f"rush {self.rounds['checklist']}"}
        with self.post(
            "/api/checklist/submissions/",
            "submit paper",
            data=fields,
            files={"genuine": (name, data)},
        ) as answer:
            run = _json(answer).get("run") or {}
            self._submitted("checklist", answer, run.get("id") if isinstance(run, dict) else None)

    @task(6)
    def watch(self) -> None:
        """The participant's own pages: its latest run's page and status, or its list."""
        if not self.my_runs:
            self.get("/runs/mine/", "page")
            return
        pk = self.my_runs[-1] if random.random() < 0.7 else random.choice(self.my_runs)
        if random.random() < 0.3:
            self.get(f"/runs/{pk}/", "run page")
        else:
            self.get(f"/runs/{pk}/status/", "run status")


class ApiClient(_Account):
    """A script polling runs and downloading the bundles of ended ones."""

    fixed_count = _int("RUSH_API_CLIENTS", 5)
    wait_time = between(1, 3)
    role = "api_clients"

    def _get(self, url: str, kind: str, **kwargs: Any) -> Any:
        return self.get(url, kind, headers=self.token_header, **kwargs)

    @task(4)
    def poll_runs(self) -> None:
        query = {"ordering": random.choice(("-created_at", "-finished_at", "status"))}
        self._get("/api/runs/", "API run poll", params={**query, "page": random.choice((1, 2))})

    def _ended_run(self) -> int | None:
        """An ended run to read: the demo's, or one a participant's submission made."""
        return random.choice(FIXTURE["ended_runs"] or _runs or [0]) or None

    @task(4)
    def poll_run(self) -> None:
        if pk := self._ended_run():
            self._get(f"/api/runs/{pk}/", "API run poll")

    @task(2)
    def run_items(self) -> None:
        if pk := self._ended_run():
            self._get(f"/api/runs/{pk}/items/", "API run poll", params={"page_size": 100})

    @task(1)
    def bundle(self) -> None:
        pk = self._ended_run()
        if not pk:
            return
        url = f"/api/runs/{pk}/bundle/"
        with self.client.get(
            url, name="bundle download", headers=self.token_header, catch_response=True
        ) as answer:
            # A participant's run (when the seed made no ended ones) may still be judged: its
            # bundle is made once it ends, and 409 says so.
            still_judged = answer.status_code == 409 and pk not in FIXTURE["ended_runs"]
            if answer.status_code == 200 or still_judged:
                answer.success()
            else:
                answer.failure(f"HTTP {answer.status_code} {url}: {(answer.text or '')[:160]}")


@cache
def _hostile_payloads() -> list[tuple[str, dict[str, Any]]]:
    """(url, request arguments) of each hostile upload, made once per Locust process."""

    def paper(url: str, field: str, name: str, data: bytes) -> tuple[str, dict[str, Any]]:
        extra = {"assess": "true"} if field == "genuine" else {}
        return url, {"files": {field: (name, data)}, "data": extra}

    uploads = []
    for label, make in hostile_files.PDF_ROWS.items():
        data = cast(Callable[[], bytes], make)()
        name = label.replace(" ", "-") + ".pdf"
        uploads.append(paper("/api/checklist/extract/", "file", name, data))
        uploads.append(paper("/api/checklist/submissions/", "genuine", name, data))
    uploads.append(paper("/api/checklist/submissions/", "genuine", "bomb.zip", _fan_out_zip()))
    csv = hostile_files.probe_csv()
    fields = {"suite": FIXTURE.get("probe_suite", ""), "model": "hostile", "format": "xstest"}
    uploads.append(
        ("/api/probes/submissions/", {"files": {"file": ("r.csv", csv)}, "data": fields})
    )
    repo = (FIXTURE.get("repos") or [""])[0]
    title = json.dumps(hostile_files.audit_results()).encode()
    uploads.append(
        (
            f"/api/audit/repos/{repo}/results/?scanner=hostile",
            {"data": title, "headers": {"Content-Type": "application/json"}},
        )
    )
    return uploads


def _fan_out_zip(k: int = 3, depth: int = 10) -> bytes:
    """LaTeX sources whose ``\\input`` chain inlines one file 3**10 times (the tests' bomb)."""
    members = {"main.tex": b"\\documentclass{article}\\begin{document}\\input{l0}\\end{document}"}
    for i in range(depth):
        members[f"l{i}.tex"] = (f"\\input{{l{i + 1}}}\n" * k).encode()
    members[f"l{depth}.tex"] = b"Some words of the paper. " * 40
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


class Hostile(_Account):
    """An account sending hostile files back to back: each must be refused (4xx, or 503 with
    Retry-After when the site's readers are all busy), never another 5xx and never at the
    other visitors' expense. It does not wait for Retry-After."""

    fixed_count = _int("RUSH_HOSTILE", 3)
    wait_time = constant(0)
    role = "hostile"

    @task
    def upload(self) -> None:
        url, arguments = random.choice(_hostile_payloads())
        with self.post(url, "hostile upload", **arguments) as answer:
            if 400 <= answer.status_code < 500 or busy(answer) or not answer.status_code:
                answer.success()  # refused (or busy; status 0: closed unread, see _rush_goals)
            else:
                answer.failure(f"HTTP {answer.status_code}: not refused")


def _json(answer: Any) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
