"""Every route, generated from the URL resolver, fetched by every kind of viewer (issue 36).

The routes are not listed by hand: :func:`site_routes` walks the resolver, so a new page or
endpoint is fetched here the day it is added. A route with path arguments is filled from
:data:`ROUTE_ARGS` (the other team's hidden or private objects, the hidden repo...); a route
this file cannot fill FAILS :func:`test_every_route_s_arguments_can_be_filled`, so nobody
has to remember to cover it.

* Leaks: the world below has a hidden probe and audit phase with an entrant from each of two
  teams, a hidden repo's truth, each team's private checklist paper and webhook, and a judge
  record with a secret in its URL. Each route is fetched as an anonymous visitor, a
  participant, the other team's member and staff; no answer may carry a marker its viewer
  must not see (names, truth text, private text, secrets).
* Bad parameters: a NUL in the path or any query parameter, huge integers and wrong types
  give a 4xx (JSON on the API, a page on the site), never a 500.

Admin pages are left to the admin's own tests (staff see everything there by design).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any, cast
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client, TestCase, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from benchmarks_app.models import JudgeRecord, Scanner
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.services.audit import (
    audit_release_create,
    audit_release_evaluate_entries,
    audit_release_make_official,
    audit_release_publish,
    audit_run_create,
)
from benchmarks_app.services.phases import phase_create
from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
from benchmarks_app.services.runs import run_wait
from benchmarks_app.services.webhooks import webhook_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.benchmarks_app.probes.conftest import BAD, GOOD, PROBES, jsonl, responses_jsonl
from tests.factories.audit import (
    RepoFactory,
    ScanFindingFactory,
    ScannerFactory,
    ScanResultFactory,
    TruthFindingFactory,
)
from tests.factories.checklist import (
    ChecklistSubmissionFactory,
    MembershipFactory,
    PaperFactory,
    TeamFactory,
)
from tests.factories.common import ChecklistRunFactory

pytestmark = pytest.mark.django_db

# --- routes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name"
    pattern: str
    converters: dict[str, str]  # argument -> converter class name ("IntConverter"...)


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            converters = getattr(entry.pattern, "converters", {})
            yield Route(
                name=f"{namespace}{entry.name or ''}",
                pattern=prefix + str(entry.pattern),
                converters={k: type(v).__name__ for k, v in converters.items()},
            )


def site_routes() -> list[Route]:
    """Every route but the admin's, as the resolver has them."""
    return [r for r in _walk(get_resolver().url_patterns) if not r.pattern.startswith("admin/")]


# --- the world -----------------------------------------------------------------------------

TRUTH_MARKERS = ("truthtitlexq", "truthdescxq")
SECRET = "secretjudgeq9"


@dataclass
class Team:
    """One participant's team and everything of theirs that others may not see."""

    user: Any
    scanner: Scanner
    audit_run: Any
    probe_submission: Any
    probe_run: Any
    checklist_entry: Any
    checklist_run: Any
    paper: Any
    webhook: Any
    markers: tuple[str, ...] = field(default=())


@dataclass
class World:
    mine: Team  # the participant's
    theirs: Team  # the other team's
    staff: Any
    hidden_repo: Any
    public_repo: Any
    dataset_slug: str
    judge_record: Any


def _team(tag: str, *, repo: Any, release: DatasetRelease, audit_phase: Any, suite: Any) -> Team:
    user = get_user_model().objects.create_user(f"leak-{tag}", password="pw-leak-123")
    scanner = cast(Scanner, ScannerFactory(name=f"hidscan{tag}", owner=user))
    result = ScanResultFactory(repo=repo, scanner=scanner)
    ScanFindingFactory(scan_result=result, index=0, title=f"finding of {tag}")
    audit_run = run_wait(
        run=audit_run_create(scanner=scanner, judge="offline", release=release, phase=audit_phase)
    )
    probe_run = probe_submission_submit(
        suite_name=suite.name,
        model_name=f"hidmodel{tag}",
        text=responses_jsonl(GOOD if tag == "p" else BAD),
        owner=user,
    )
    probe_run = run_wait(run=probe_run)
    team = TeamFactory(name=f"team {tag}")
    MembershipFactory(team=team, user=user)
    entry = ChecklistSubmissionFactory(team=team)
    paper = PaperFactory(
        submission=entry, extracted_text=f"papertext{tag}q9 private", title=f"papertitle{tag}q9"
    )
    checklist_run = ChecklistRunFactory(checklist_submission=entry)
    webhook = webhook_create(owner=user, url=f"https://hooks.example.org/hook{tag}q9")
    return Team(
        user=user,
        scanner=scanner,
        audit_run=audit_run,
        probe_submission=probe_run.probe_submission,
        probe_run=probe_run,
        checklist_entry=entry,
        checklist_run=checklist_run,
        paper=paper,
        webhook=webhook,
        markers=(
            f"hidscan{tag}",
            f"hidmodel{tag}",
            f"papertext{tag}q9",
            f"papertitle{tag}q9",
            f"hook{tag}q9",
        ),
    )


def _build_world() -> World:
    now = timezone.now()
    public_repo = RepoFactory(project_id="pub_repo_2025", is_public=True)
    TruthFindingFactory(repo=public_repo, title="Public reentrancy")
    hidden_repo = RepoFactory(project_id="hid_repo_2025", is_public=False)
    TruthFindingFactory(repo=hidden_repo, title=TRUTH_MARKERS[0], description=TRUTH_MARKERS[1])
    publish_dataset(public_repo, hidden_repo, slug="leakds")
    release = DatasetRelease.objects.get(dataset__slug="leakds", number=1)
    # A public entrant, on the board before the hidden phase opened.
    public = cast(Scanner, ScannerFactory(name="pubscan"))
    for repo in (public_repo, hidden_repo):
        ScanFindingFactory(scan_result=ScanResultFactory(repo=repo, scanner=public), index=0)
    run_wait(run=audit_run_create(scanner=public, judge="offline", release=release))
    starts, ends = now - timedelta(days=1), now + timedelta(days=5)
    audit_phase = phase_create(
        target=release, name="Final", slug="final", is_hidden=True, starts_at=starts, ends_at=ends
    )
    suite = probe_suite_import(name="leaksuite", text=jsonl(PROBES), fmt="jsonl").suite
    with TestCase.captureOnCommitCallbacks(execute=True):
        run_wait(
            run=probe_submission_submit(
                suite_name="leaksuite", model_name="pubmodel", text=responses_jsonl(GOOD)
            )
        )
    phase_create(
        target=suite, name="Final", slug="final", is_hidden=True, starts_at=starts, ends_at=ends
    )
    teams = {}
    for tag in ("p", "o"):
        with TestCase.captureOnCommitCallbacks(execute=True):
            teams[tag] = _team(
                tag, repo=hidden_repo, release=release, audit_phase=audit_phase, suite=suite
            )
    # A new official release, its entries evaluated again on the entrants' behalf (issue 36
    # item 1): the hidden phase's entrants must not come out on its public board.
    second = audit_release_publish(release=audit_release_create(dataset=release.dataset))
    audit_release_make_official(release=second)
    with TestCase.captureOnCommitCallbacks(execute=True):
        audit_release_evaluate_entries(release=second)
    record = JudgeRecord.objects.create(
        name="secret-judge", kind="openai", base_url=f"https://judge:{SECRET}@judge.example.org/v1"
    )
    staff = get_user_model().objects.create_user("leak-staff", password="pw", is_staff=True)
    return World(
        mine=teams["p"],
        theirs=teams["o"],
        staff=staff,
        hidden_repo=hidden_repo,
        public_repo=public_repo,
        dataset_slug="leakds",
        judge_record=record,
    )


@pytest.fixture(scope="module")
def world_media(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tmp_path_factory.mktemp("leak-media")


@pytest.fixture(autouse=True)
def _media_root(world_media: Any) -> Any:
    """The world's uploads (papers...) stay where its tests read them: one folder per module,
    not the suite's one per test (``tests/conftest.py``)."""
    return world_media


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any, world_media: Any) -> Iterator[World]:
    """One world for the whole module, built once (it was built for each test: its runs,
    phases and releases took most of the module's time) inside a transaction rolled back at
    the module's end. Each test still runs in its own savepoint (``django_db``), so what a
    test writes (the POSTs of the write test) is undone before the next one reads."""
    with (
        django_db_blocker.unblock(),
        override_settings(MEDIA_ROOT=world_media),
        transaction.atomic(),
    ):
        cache.clear()
        try:
            yield _build_world()
        finally:
            transaction.set_rollback(True)


# Each route with path arguments: the argument sets it is fetched with (the other team's
# hidden or private objects: a participant and a visitor must get nothing of them).
ArgsOf = Callable[[World], list[dict[str, Any]]]


def _runs(w: World) -> list[dict[str, Any]]:
    t = w.theirs
    return [{"pk": t.audit_run.pk}, {"pk": t.probe_run.pk}, {"pk": t.checklist_run.pk}]


ROUTE_ARGS: dict[str, ArgsOf] = {
    **{
        name: _runs
        for name in (
            "api:run-detail",
            "api:run-items",
            "api:run-cancel",
            "api:run-resume",
            "api:run-bundle",
            "runs:detail",
            "runs:status",
            "runs:cancel",
            "runs:resume",
            "runs:bundle",
        )
    },
    "api:scanner-detail": lambda w: [{"pk": w.theirs.scanner.pk}],
    "api:repo-detail": lambda w: [{"pk": w.hidden_repo.pk}],
    "api:audit-dataset-submit": lambda w: [{"slug": w.dataset_slug}],
    "api:audit-report": lambda w: [{"scanner": w.theirs.scanner.name}],
    "api:audit-run-choose": lambda w: [{"pk": w.theirs.audit_run.pk}],
    "api:audit-submit": lambda w: [{"project_id": w.hidden_repo.project_id}],
    "audit:run": lambda w: [{"pk": w.theirs.audit_run.pk}],
    "audit:run-choose": lambda w: [{"pk": w.theirs.audit_run.pk}],
    "audit:scanner": lambda w: [{"name": w.theirs.scanner.name}],
    "audit:scanner-describe": lambda w: [{"name": w.theirs.scanner.name}],
    **{
        name: (lambda w: [{"pk": w.theirs.probe_submission.pk}])
        for name in (
            "api:probes-report",
            "api:probes-choose",
            "probes:submission",
            "probes:choose",
            "probes:report-json",
            "probes:report-md",
        )
    },
    **{
        name: (lambda w: [{"pk": w.theirs.checklist_entry.pk}])
        for name in (
            "api:checklist-submission-detail",
            "api:checklist-submission-assess",
            "api:checklist-submission-withdraw",
            "api:checklist-submission-choice",
            "checklist:submission-detail",
            "checklist:submission-assess",
            "checklist:submission-withdraw",
            "checklist:submission-choose",
        )
    },
    "api:checklist-paper-download": lambda w: [{"pk": w.theirs.paper.pk}],
    "checklist:paper-download": lambda w: [{"pk": w.theirs.paper.pk}],
    **{
        name: (lambda w: [{"pk": w.theirs.webhook.pk}])
        for name in (
            "api:webhook-detail",
            "api:webhook-rotate-secret",
            "api:webhook-deliveries",
            "account:webhook-delete",
            "account:webhook-rotate",
        )
    },
    "api:checklist-team-member": lambda w: [{"username": w.theirs.user.username}],
    "signup_confirm": lambda w: [{"uidb64": "MQ", "token": "c0ffee-0123456789abcdef"}],
    "password_reset_confirm": lambda w: [{"uidb64": "MQ", "token": "c0ffee-0123456789abcdef"}],
}

# Boards with a hidden phase are also read with the phase (and as downloads).
QUERY_VARIANTS: dict[str, list[dict[str, str]]] = {
    "audit:leaderboard": [
        {"phase": "final"},
        {"phase": "final", "format": "csv"},
        {"phase": "final", "format": "json"},
    ],
    "api:audit-leaderboard": [{"phase": "final"}],
    "audit:scanner": [{"format": "json"}, {"format": "md"}],
    "probes:leaderboard": [
        {"suite": "leaksuite", "phase": "final"},
        {"suite": "leaksuite", "phase": "final", "leaksuite-format": "csv"},
        {"suite": "leaksuite", "phase": "final", "leaksuite-format": "json"},
    ],
    "api:probes-leaderboard": [{"suite": "leaksuite", "phase": "final"}],
    "api:run-list": [{"phase": "final"}],
    "runs:list": [{"phase": "final"}],
}


def test_every_route_s_arguments_can_be_filled() -> None:
    unfilled = sorted(
        f"{r.name} ({r.pattern})"
        for r in site_routes()
        if r.converters and r.name not in ROUTE_ARGS
    )
    assert not unfilled, (
        "routes whose arguments the leak and bad-parameter tests cannot fill; add them to "
        f"ROUTE_ARGS: {unfilled}"
    )
    nameless = [r.pattern for r in site_routes() if not r.name or r.name.endswith(":")]
    assert not nameless, f"routes without a name cannot be reversed: {nameless}"


@dataclass(frozen=True)
class Fetch:
    name: str  # the route's
    url: str
    hidden_phase: bool  # the URL shows the hidden phases' board or one of their entries


def _hidden_phase_entries(w: World) -> set[tuple[str, Any]]:
    """The (argument, value) pairs naming the other team's entries in the hidden phases."""
    t = w.theirs
    return {
        ("pk", t.audit_run.pk),
        ("pk", t.probe_run.pk),
        ("pk", t.probe_submission.pk),
        ("name", t.scanner.name),
        ("scanner", t.scanner.name),
    }


def _fetches(w: World) -> Iterator[Fetch]:
    """Every fetch: each route with each of its argument sets and query variants."""
    hidden_entries = _hidden_phase_entries(w)
    for route in site_routes():
        arg_sets = ROUTE_ARGS[route.name](w) if route.converters else [{}]
        # A run, report or scanner route (not a checklist entry's, paper's or webhook's that
        # may share a pk) filled with a hidden-phase entry.
        entry_route = re.search(r"run|probe|audit|scanner", route.name) is not None
        for args in arg_sets:
            path = reverse(route.name, kwargs=args)
            of_hidden = entry_route and bool(hidden_entries & set(args.items()))
            yield Fetch(route.name, path, of_hidden)
            for query in QUERY_VARIANTS.get(route.name, []):
                yield Fetch(route.name, f"{path}?{urlencode(query)}", of_hidden or "phase" in query)


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


# What differs between any two answers: the masked CSRF token, the CSP nonce.
_PER_RESPONSE = re.compile(r'(csrfmiddlewaretoken" value="|nonce="|csrftoken=)[^"; ]*')


def _with_free_names(text: str, names: list[str]) -> str:
    for name in names:
        text = text.replace(name, f"nosuch{name[::-1]}")
    return _PER_RESPONSE.sub(r"\1", text)


# --- places among entries the viewer cannot see -------------------------------------------

# Where a board carries a place: a column or key named for a rank, a rank range, a paired
# rank, a tie; the "#" column of a ranked table; "rank 2", "ranked #2" in prose.
_PLACE_KEY = re.compile(r"rank|paired|place|position|tie", re.IGNORECASE)
_PLACE_PROSE = re.compile(r"\b(?:rank(?:ed)?|place[d]?)\s+#?(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")


class _Tables(HTMLParser):
    """Each HTML table's cells as (column key, text): the key is the header's ``data-key``
    (else its text), "rank" for the ranked table's "#" column."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self._keys: list[str] = []
        self._row: list[str] = []
        self._in: str | None = None  # "th" or "td" while inside one
        self._text: list[str] = []
        self._key = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._keys = []
        elif tag == "tr":
            self._row = []
        elif tag in ("th", "td"):
            self._in, self._text = tag, []
            classes = (attributes.get("class") or "").split()
            self._key = "rank" if "rank" in classes else (attributes.get("data-key") or "")

    def handle_data(self, data: str) -> None:
        if self._in:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != self._in:
            return
        text = "".join(self._text).strip()
        if tag == "th":
            self._keys.append(self._key or text)
        else:
            column = len(self._row)
            key = self._key or (self._keys[column] if column < len(self._keys) else "")
            self.cells.append((key, text))
            self._row.append(text)
        self._in = None


def _json_places(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_places(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _json_places(v, key)
    elif value is not None and not isinstance(value, bool):
        yield key, str(value)


def places_shown(response: Any, body: str) -> list[str]:
    """Every place (rank, rank range, paired rank...) the answer shows, as "key=value"."""
    kind = response.get("Content-Type", "")
    cells: list[tuple[str, str]] = []
    if "csv" in kind:
        cells = [
            (k or "", v or "") for row in csv.DictReader(io.StringIO(body)) for k, v in row.items()
        ]
    elif "json" in kind:
        try:
            cells = list(_json_places(json.loads(body)))
        except ValueError:
            cells = []
    elif "html" in kind:
        tables = _Tables()
        tables.feed(body)
        cells = tables.cells
        prose = re.sub(r"<[^>]+>", " ", body)
        cells += [("prose", m.group(0)) for m in _PLACE_PROSE.finditer(prose)]
    return [f"{k}={v}" for k, v in cells if (_PLACE_KEY.search(k) or k == "prose") and v]


def places_beyond(response: Any, body: str, entries: int) -> list[str]:
    """The places shown that only a board of more than ``entries`` rows can give."""
    return [
        place
        for place in places_shown(response, body)
        if any(int(n) > entries for n in _NUMBER.findall(place.split("=", 1)[1]))
    ]


def _client(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def test_no_route_shows_a_viewer_what_they_may_not_see(world: World) -> None:
    mine, theirs = world.mine.markers, world.theirs.markers
    viewers: dict[str, tuple[Any, tuple[str, ...]]] = {
        "anonymous": (None, (*mine, *theirs, *TRUTH_MARKERS, SECRET)),
        "participant": (world.mine.user, (*theirs, *TRUTH_MARKERS, SECRET)),
        "other team": (world.theirs.user, (*mine, *TRUTH_MARKERS, SECRET)),
        "staff": (world.staff, (SECRET,)),
    }
    # Each viewer's entries in a hidden phase's board as they see it (alone: their own). The
    # other team's probe entry is the worse of the two, second on the whole board: showing
    # them a "2" anywhere there counts the participant's hidden entry.
    entries_seen = {"anonymous": 0, "participant": 1, "other team": 1}
    fetches = list(_fetches(world))
    leaks: list[str] = []
    errors: list[str] = []
    for viewer, (user, forbidden) in viewers.items():
        client = _client(user)
        for fetch in fetches:
            name, url = fetch.name, fetch.url
            response = client.get(url)
            if response.status_code >= 500:
                errors.append(f"{viewer} GET {url} ({name}): {response.status_code}")
                continue
            body = _body(response)
            if fetch.hidden_phase and viewer in entries_seen:
                beyond = places_beyond(response, body, entries_seen[viewer])
                if beyond:
                    leaks.append(
                        f"{viewer} GET {url} ({name}): places counting hidden entries {beyond}"
                    )
            seen = sorted(m for m in forbidden if m in body)
            echoed = [m for m in seen if m in url]
            if seen and seen == echoed:
                # The name came with the request (a 404 may repeat it): no leak as long as
                # the answer is the one a name that never existed gets.
                free = client.get(_with_free_names(url, echoed))
                if (response.status_code, _with_free_names(body, echoed)) == (
                    free.status_code,
                    _with_free_names(_body(free), []),
                ):
                    continue
                seen = [f"{m} (answered unlike a free name)" for m in seen]
            if seen:
                leaks.append(f"{viewer} GET {url} ({name}): {seen}")
    assert not errors, "\n".join(errors)
    assert not leaks, "\n".join(leaks)
    # The markers are real: their owners and staff do see them where they should.
    assert "hidscano" in _body(_client(world.theirs.user).get(reverse("api:scanner-list")))
    staff_repo = _client(world.staff).get(reverse("api:repo-detail", args=[world.hidden_repo.pk]))
    assert TRUTH_MARKERS[0] in _body(staff_repo)
    # ...and the place check reads places: staff see the hidden probe board's second place.
    board = reverse("probes:leaderboard")
    staff_csv = _client(world.staff).get(
        f"{board}?{urlencode({'suite': 'leaksuite', 'phase': 'final', 'leaksuite-format': 'csv'})}"
    )
    assert places_beyond(staff_csv, _body(staff_csv), 1)
    staff_page = _client(world.staff).get(f"{board}?suite=leaksuite&phase=final")
    assert places_beyond(staff_page, _body(staff_page), 1)


# --- bad parameters ------------------------------------------------------------------------

# The query parameters the site's views and filters read (a NUL in any parameter is refused
# before any view runs, so the list need not be complete for that case).
PARAMETERS = (
    "page",
    "sort",
    "phase",
    "suite",
    "release",
    "judge",
    "status",
    "benchmark",
    "scanner",
    "dataset",
    "model",
    "format",
    "board",
    "a",
    "b",
    "version",
    "limit",
    "offset",
    "cursor",
    "q",
    "next",
    "challenge",
    "repos",
    "repo",
    "run",
    "mine",
)
HUGE = "9" * 40
HOSTILE_QUERIES: dict[str, dict[str, str]] = {
    "nul": {p: "x\x00y" for p in PARAMETERS},
    "huge": {p: HUGE for p in PARAMETERS},
    "wrong type": {p: "-1.5[]{}" for p in PARAMETERS},
}


def _hostile_paths(route: Route, w: World) -> Iterator[tuple[str, str]]:
    """(kind, path) of the route with hostile path arguments: a huge integer for an integer
    argument, a NUL inside a text one."""
    if not route.converters:
        return
    args = ROUTE_ARGS[route.name](w)[0]
    for key, converter in route.converters.items():
        if converter == "IntConverter":
            yield "huge id", reverse(route.name, kwargs={**args, key: int(HUGE)})
        elif converter in ("StringConverter", "SlugConverter"):
            good = reverse(route.name, kwargs={**args, key: "zzz"})
            # reverse() would quote the NUL: put it in the path as a request carries it.
            yield "nul in path", good.replace("zzz", "z%00z", 1)


def test_bad_parameters_get_a_4xx_never_a_500(world: World) -> None:
    failures: list[str] = []

    def check(client: Client, kind: str, route: Route, url: str) -> None:
        response = client.get(url)
        status = response.status_code
        api = route.pattern.startswith("api/")
        if status >= 500:
            failures.append(f"{kind}: GET {url!r} ({route.name}): {status}")
        elif kind.startswith("nul"):
            json_answer = response.get("Content-Type", "").startswith("application/json")
            if not 400 <= status < 500 or (api and not json_answer):
                failures.append(f"{kind}: GET {url!r} ({route.name}): {status}, not a 4xx")

    # As staff: every route lets them in, so the parameters reach the deepest code (a
    # visitor is sent to the login page by many routes, before any parameter is read).
    for user in (world.staff,):
        client = _client(user)
        for route in site_routes():
            arg_sets = ROUTE_ARGS[route.name](world) if route.converters else [{}]
            path = reverse(route.name, kwargs=arg_sets[0])
            for kind, query in HOSTILE_QUERIES.items():
                check(client, kind, route, f"{path}?{urlencode(query)}")
            for kind, hostile in _hostile_paths(route, world):
                check(client, kind, route, hostile)
    assert not failures, "\n".join(failures)


# --- names confirmed by writing under them -------------------------------------------------

# A POST route is posted with the arguments of its GETs, except where the participant writes
# to their own side (a submission goes to a repo everybody may see).
POST_ARGS: dict[str, ArgsOf] = {
    "api:audit-submit": lambda w: [{"project_id": w.public_repo.project_id}],
}


def _bad_posts(w: World, scanner: str, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(encoding, client.post keyword arguments) of a bad upload under the names given, in
    every field a submission form or endpoint reads a scanner or model name from."""
    fields = {
        "scanner": scanner,
        "model": model,
        "suite": "leaksuite",
        "dataset": w.dataset_slug,
        "repo": w.public_repo.project_id,
        "judge": "offline",
    }
    yield (
        "form",
        {
            "data": {
                **fields,
                "file": SimpleUploadedFile("findings.json", b"{not json", "application/json"),
            }
        },
    )
    yield (
        "json",
        {
            "data": json.dumps(
                {
                    **fields,
                    # A probe file missing every probe but one, a findings list that is not one.
                    "responses": [{"probe_id": "w1", "output": ""}],
                    "findings": "not a list",
                }
            ),
            "content_type": "application/json",
        },
    )


def _masked(text: str, names: list[str]) -> str:
    """The answer with the names asked under (in any case) and per-response tokens masked."""
    for name in names:
        text = re.sub(re.escape(name), "NAME", text, flags=re.IGNORECASE)
    return _PER_RESPONSE.sub(r"\1", text)


# Every route gets dozens of bad uploads from one participant here, past the allowances
# of refused submissions (its 429 answers any name alike, so it would only hide the answers
# this test compares).
@override_settings(UPLOAD_REFUSALS_PER_HOUR=100_000, UPLOAD_REFUSALS_PER_10_MIN=100_000)
def test_no_write_confirms_a_hidden_entrant_s_name(world: World) -> None:
    """Every route is POSTed, as the participant, a bad upload under the other team's hidden
    scanner and model names, under names that never existed, and under look-alikes of each:
    a hidden name must answer as a free one does (issue 36 item 3)."""
    hidden = (world.theirs.scanner.name, world.theirs.probe_submission.model_name)
    free = ("nosuchscan", "nosuchmodel")
    # A look-alike differs from the name in case only: the look-alike check must not name
    # the hidden entrant it resembles.
    cases = {
        "hidden": hidden,
        "free": free,
        "hidden look-alike": tuple(n.upper() for n in hidden),
        "free look-alike": tuple(n.upper() for n in free),
    }
    differences: list[str] = []
    echoes: list[str] = []
    errors: list[str] = []
    free_statuses: dict[tuple[str, str], int] = {}
    for route in site_routes():
        args_of = POST_ARGS.get(route.name) or ROUTE_ARGS.get(route.name)
        arg_sets = args_of(world) if route.converters and args_of else [{}]
        url = reverse(route.name, kwargs=arg_sets[0])
        if _client(None).post(url).status_code == 405:
            continue  # not a write: any name gets the same 405
        # A hidden name in the route's own path came with the request (a 404 may repeat it).
        unasked = [name for name in hidden if name not in url]
        for encoding in ("form", "json"):
            answers: dict[str, tuple[int, str]] = {}
            for case, (scanner, model) in cases.items():
                client = _client(world.mine.user)
                query = urlencode({"scanner": scanner, "model": model})
                post = dict(_bad_posts(world, scanner, model))[encoding]
                response = client.post(f"{url}?{query}", **post)
                body = _body(response)
                where = f"{case} POST {url} ({route.name}, {encoding})"
                if response.status_code >= 500:
                    errors.append(f"{where}: {response.status_code}")
                # The exact names of the hidden entrants, never asked for by a look-alike.
                if case == "hidden look-alike" and any(name in body for name in unasked):
                    echoes.append(f"{where}: {response.status_code} {body[:300]!r}")
                if case == "free":
                    free_statuses[(route.name, encoding)] = response.status_code
                asked = [scanner, model, *(name for name in hidden if name in url)]
                answers[case] = (response.status_code, _masked(body, asked))
            for a, b in (("hidden", "free"), ("hidden look-alike", "free look-alike")):
                if answers[a] != answers[b]:
                    differences.append(
                        f"POST {url} ({route.name}, {encoding}): {a} {answers[a][0]} "
                        f"{answers[a][1][:300]!r} vs {b} {answers[b][0]} {answers[b][1][:300]!r}"
                    )
    assert not (errors or echoes or differences), "\n".join(
        [
            *errors,
            *(f"names a hidden entrant: {echo}" for echo in echoes),
            *(f"unlike a free name: {difference}" for difference in differences),
        ]
    )
    # The bad uploads reached the submissions' own checks (not a login page or a 404), so the
    # comparison above is one of the answers that used to tell whose a name was.
    reached = {
        ("api:audit-submit", "json"): 400,
        ("api:audit-dataset-submit", "json"): 400,
        ("api:probes-submit", "json"): 400,
        ("audit:submit", "form"): 400,
        ("audit:submit-dataset", "form"): 400,
        ("probes:submit", "form"): 400,
    }
    assert {key: free_statuses.get(key) for key in reached} == reached
