"""Uploads read with caps (issue 23, rows 5 and 6): a probe responses file is read no further
than its suite's probes plus a margin, and a finding's or response's field over its length
limit is refused naming the finding (or line) and the field, on the API, the web forms and
the management commands; real bundled files still go through unchanged."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun, Repo, Response, ResponseSubmission, ScanFinding
from benchmarks_app.services.probes import probe_submission_submit, probe_suite_import
from scoring.audit.parsing import FindingProblems, parse_scan
from scoring.limits import TextLimits
from scoring.probes.io import ProbeFormatError, RowCapExceeded, parse_responses
from tests.benchmarks_app.probes.conftest import GOOD, PROBES, jsonl
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

SAMPLE = Path(__file__).resolve().parents[2] / "benchmarks_app" / "sample_data"
FINDING = {"title": "Reentrancy in Vault.withdraw", "description": "Drains.", "severity": "high"}
HUGE_TITLE = "A" * 15_000_000
MILLION_ROWS = 1_000_000


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("participant", password="pw")


@pytest.fixture
def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def repo(db: Any) -> Repo:
    repo = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01", name="Vault"))
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in withdraw")
    return repo


@pytest.fixture
def suite(db: Any) -> Any:
    return probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl").suite


def _reasons(answer: Any, field: str) -> list[str]:
    body = answer.json()
    return [e["reason"] for e in body["errors"] if e["field"] == field]


def _nothing_stored() -> bool:
    return not (
        EvaluationRun.objects.exists()
        or ScanFinding.objects.exists()
        or ResponseSubmission.objects.exists()
    )


class CountingLines:
    """The lines of a stream, counting how many the reader took."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.read = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.read += 1
        return line


def _million_row_csv() -> str:
    # What the attacker sent: 1,000,000 rows, about 11 MB.
    return "id,completion\n" + "".join(f"v2-{i},Sure.\n" for i in range(MILLION_ROWS))


# --- row 5: a responses file is read up to its suite's probes plus a margin ------------------


@pytest.mark.parametrize("fmt", ["xstest", "jsonl"])
def test_the_reader_stops_at_the_row_cap(fmt: str) -> None:
    if fmt == "xstest":
        stream = io.StringIO(_million_row_csv())
    else:
        stream = io.StringIO(
            "".join(f'{{"probe_id": "p{i}", "output": "Sure."}}\n' for i in range(MILLION_ROWS))
        )
    lines = CountingLines(stream)
    with pytest.raises(RowCapExceeded) as info:
        parse_responses(lines, fmt, "responses", max_rows=14)
    assert info.value.max_rows == 14
    assert lines.read <= 14 + 2  # the header and the one row past the cap: no further
    assert "more than 14 rows" in str(info.value)


def test_a_million_row_csv_is_refused_naming_the_cap_and_the_suite(
    api: APIClient, client: Any, user: Any, suite: Any, settings: Any
) -> None:
    settings.PROBE_RESPONSES_EXTRA_ROWS = 10
    data = _million_row_csv().encode()
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("c.csv", data)},
        format="multipart",
    )
    assert answer.status_code == 400, answer.content[:300]
    (reason,) = _reasons(answer, "file")
    assert "more than 14 responses" in reason and "suite 'mini' has 4 probes" in reason
    assert "reading stopped at line 16" in reason
    client.force_login(user)
    page = client.post(
        "/probes/submit/",
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("c.csv", data)},
    )
    assert page.status_code == 400
    assert "more than 14 responses" in page.content.decode()
    assert _nothing_stored()


def test_the_submission_reads_no_further_than_the_cap(suite: Any) -> None:
    lines = CountingLines(io.StringIO(_million_row_csv()))
    with pytest.raises(ProbeFormatError) as info:
        probe_submission_submit(suite_name="mini", model_name="m", text=lines, fmt="xstest")
    assert lines.read <= 4 + 10 + 2
    assert info.value.errors == [
        "more than 14 responses: suite 'mini' has 4 probes, so at most 14 rows are read (one "
        "per probe, plus 10 spare); reading stopped at line 16"
    ]
    assert _nothing_stored()


def test_a_responses_list_past_the_cap_is_refused_before_validation(
    api: APIClient, suite: Any
) -> None:
    items = [{"probe_id": f"p{i}", "output": "Sure."} for i in range(5000)]
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "responses": items},
        format="json",
    )
    assert answer.status_code == 400
    (reason,) = _reasons(answer, "responses")
    assert "more than 14 responses" in reason and "'mini'" in reason
    assert _nothing_stored()


def test_the_command_refuses_a_file_past_the_cap(suite: Any, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,completion\n" + "".join(f"v2-{i},Sure.\n" for i in range(100)))
    with pytest.raises(CommandError, match=r"more than 14 responses: suite 'mini'"):
        call_command("submit_responses", str(path), "--suite", "mini", "--model", "m")
    assert _nothing_stored()


# --- row 6: fields over their length limit ---------------------------------------------------


def test_a_15_million_character_title_is_refused_on_the_api(api: APIClient, repo: Repo) -> None:
    body = json.dumps([{**FINDING, "title": HUGE_TITLE}, FINDING])
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool",
        body,
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content[:300]
    assert _reasons(answer, "findings") == [
        "finding 1.title: 15,000,000 characters, more than the 1,000 allowed"
    ]
    assert _nothing_stored()


def test_a_15_million_character_title_is_refused_on_the_form_and_the_api_file(
    api: APIClient, client: Any, user: Any, repo: Repo
) -> None:
    data = json.dumps({"findings": [{**FINDING, "title": HUGE_TITLE}]}).encode()
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]),
        {"scanner": "mytool", "file": SimpleUploadedFile("results.json", data)},
        format="multipart",
    )
    assert answer.status_code == 400
    (reason,) = _reasons(answer, "file")
    assert "finding 1.title: 15,000,000 characters, more than the 1,000 allowed" in reason
    client.force_login(user)
    page = client.post(
        "/audit/submit/",
        {
            "repo": repo.project_id,
            "scanner": "mytool",
            "judge": "offline",
            "file": SimpleUploadedFile("results.json", data),
        },
    )
    assert page.status_code == 400
    assert "finding 1.title: 15,000,000 characters" in page.content.decode()
    assert _nothing_stored()


def test_a_15_million_character_title_is_skipped_by_the_import_command(
    repo: Repo, tmp_path: Path
) -> None:
    folder = tmp_path / "mytool"
    folder.mkdir()
    (folder / f"{repo.project_id}_results.json").write_text(
        json.dumps({"findings": [{**FINDING, "title": HUGE_TITLE}]})
    )
    err = io.StringIO()
    call_command(
        "import_audit", str(folder), "--scanner", "mytool", stderr=err, stdout=io.StringIO()
    )
    assert "finding 1.title: 15,000,000 characters, more than the 1,000 allowed" in err.getvalue()
    assert not ScanFinding.objects.exists()


@pytest.mark.parametrize(
    ("key", "length", "limit"),
    [("description", 50_001, "50,000"), ("location", 2_001, "2,000"), ("impact", 50_001, "50,000")],
)
def test_other_finding_fields_over_their_limit_are_named(
    api: APIClient, repo: Repo, key: str, length: int, limit: str
) -> None:
    body = json.dumps([FINDING, {**FINDING, key: "x" * length}])
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool",
        body,
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert _reasons(answer, "findings") == [
        f"finding 2.{key}: {length:,} characters, more than the {limit} allowed"
    ]
    assert _nothing_stored()


def test_the_limits_are_settings(api: APIClient, repo: Repo, settings: Any) -> None:
    settings.UPLOAD_MAX_TITLE_CHARS = 10
    body = json.dumps([{**FINDING, "title": "x" * 11}])
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool",
        body,
        content_type="application/json",
    )
    assert _reasons(answer, "findings") == [
        "finding 1.title: 11 characters, more than the 10 allowed"
    ]
    answer = api.post(
        reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool",
        json.dumps([{**FINDING, "title": "x" * 10}]),
        content_type="application/json",
    )
    assert answer.status_code == 202, answer.content


def test_a_response_text_over_its_limit_is_refused(
    api: APIClient, client: Any, user: Any, suite: Any, tmp_path: Path
) -> None:
    rows = [{"probe_id": k, "output": v} for k, v in GOOD.items()]
    rows[1]["output"] = "y" * 50_001
    text = jsonl(rows)
    expected = "line 2: field 'output': 50,001 characters, more than the 50,000 allowed"
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("r.jsonl", text.encode())},
        format="multipart",
    )
    assert answer.status_code == 400
    assert _reasons(answer, "file") == [expected]
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": "m", "responses": rows},
        format="json",
    )
    assert answer.status_code == 400
    assert _reasons(answer, "responses") == [
        "response 2: field 'output': 50,001 characters, more than the 50,000 allowed"
    ]
    csv_text = "id,completion\n" + "".join(f"{r['probe_id']},{r['output']}\n" for r in rows)
    client.force_login(user)
    page = client.post(
        "/probes/submit/",
        {"suite": "mini", "model": "m", "file": SimpleUploadedFile("c.csv", csv_text.encode())},
    )
    assert page.status_code == 400
    assert "line 3: field &#x27;completion&#x27;: 50,001 characters" in page.content.decode()
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    with pytest.raises(CommandError, match=expected):
        call_command("submit_responses", str(path), "--suite", "mini", "--model", "m")
    assert _nothing_stored()


def test_a_csv_field_past_the_csv_modules_own_limit_is_a_clear_error() -> None:
    text = "id,completion\nv2-1,ok\nv2-2," + "z" * 200_000 + "\n"
    with pytest.raises(ProbeFormatError) as info:
        parse_responses(text, "xstest", "c.csv")
    assert info.value.errors == [
        "line 3: a field holds more than 131,072 characters; at most 50,000 are allowed"
    ]


# --- real files still go through unchanged ---------------------------------------------------


def test_a_bundled_scan_file_is_accepted_unchanged(api: APIClient) -> None:
    path = SAMPLE / "audit" / "baseline" / "code4rena_bakerfi-invitational_2025_02_results.json"
    document = json.loads(path.read_text())
    repo = RepoFactory(project_id=document["project"], name="BakerFi")
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Something")
    answer = api.post(
        reverse("api:audit-submit", args=[document["project"]]),
        {"scanner": "mytool", "file": SimpleUploadedFile(path.name, path.read_bytes())},
        format="multipart",
    )
    assert answer.status_code == 202, answer.content[:500]
    stored = list(ScanFinding.objects.order_by("index").values_list("title", "description"))
    assert stored == [(f["title"], f["description"]) for f in document["findings"]]


def test_a_bundled_completions_file_is_accepted_unchanged(api: APIClient) -> None:
    xstest = SAMPLE / "probes" / "xstest"
    probe_suite_import(name="xs", text=(xstest / "xstest_prompts.csv").read_text(), fmt="xstest")
    data = (xstest / "completions_gpt4.csv").read_bytes()
    answer = api.post(
        reverse("api:probes-submit"),
        {"suite": "xs", "model": "gpt4", "file": SimpleUploadedFile("completions_gpt4.csv", data)},
        format="multipart",
    )
    assert answer.status_code == 201, answer.content[:500]
    assert Response.objects.count() == 450
    longest = max(Response.objects.values_list("output", flat=True), key=len)
    assert len(longest) == 1461


def test_nested_fields_keys_and_file_level_fields_are_capped_too() -> None:
    limits = TextLimits(title=10, ref=20, text=30)
    data = {
        "project": "p",
        "notes": "n" * 31,
        "findings": [
            FINDING | {"title": "short"},
            {"title": "ok", "severity": "high", "extra": {"steps": ["s", "x" * 31]}},
            {"title": "ok", "severity": "high", "k" * 21: "v"},
        ],
    }
    with pytest.raises(FindingProblems) as info:
        parse_scan(data, limits=limits)
    assert info.value.problems == [
        "results.notes: 31 characters, more than the 30 allowed",
        "finding 2.extra.steps.1: 31 characters, more than the 30 allowed",
        "finding 3 (a key): 21 characters, more than the 20 allowed",
    ]
    data["notes"] = "n"
    del data["findings"][1:]  # type: ignore[attr-defined]
    findings, _ = parse_scan(data, limits=limits)
    assert [f.title for f in findings] == ["short"]
