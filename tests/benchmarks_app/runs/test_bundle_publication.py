"""What a run bundle publishes and how it is served: a participant's inputs as the phase (or
the benchmark's default) decides, everything for the entrant and staff, the judge by name,
model and server only; built once per variant after the run ends and read from storage
afterwards; the web download throttled like the API one."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from benchmarks_app.models import (
    BundleInputs,
    EvaluationRun,
    JudgeRecord,
    Phase,
    ProbeCaseResult,
    RunStatus,
)
from benchmarks_app.selectors import run_bundles as selector
from benchmarks_app.services.judge_records import JudgeRecordError, judge_record_create
from scoring import bundles
from tests.factories.common import ProbeRunFactory
from tests.factories.probes import ProbeFactory, ResponseFactory, ResponseSubmissionFactory

pytestmark = pytest.mark.django_db

OUTPUT = "MODEL-OUTPUT-7f3a: here is how one would do it"
EXPLANATION = "unsafe: the response says MODEL-OUTPUT-7f3a"


def _members(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist()}


def _text(data: bytes) -> str:
    return "\n".join(_members(data).values())


@pytest.fixture
def people() -> dict[str, Any]:
    users = get_user_model().objects
    return {
        "owner": users.create_user("entrant", password="pw"),
        "rival": users.create_user("rival", password="pw"),
        "staff": users.create_user("curator", password="pw", is_staff=True),
        "anonymous": None,
    }


@pytest.fixture
def probe_run(people: dict[str, Any]) -> EvaluationRun:
    """An ended probe run of the entrant's with one response and its judged case."""
    record = JudgeRecord.objects.create(
        name="house-judge",
        base_url="https://judge.example.org:8443/private-gateway/v1",
        model="judge-model-1",
        api_key_env="HOUSE_JUDGE_KEY",
    )
    submission = ResponseSubmissionFactory.create(owner=people["owner"])
    probe = ProbeFactory.create(suite=submission.suite)
    response = ResponseFactory.create(submission=submission, probe=probe, output=OUTPUT)
    run = ProbeRunFactory.create(
        probe_submission=submission,
        status=RunStatus.SUCCEEDED,
        finished_at=timezone.now(),
        judge="replay:/srv/private/recordings",
        judge_record=record,
        judge_config={
            "request": {"probe": {"base_url": "https://judge.example.org:8443/private-gateway"}}
        },
    )
    ProbeCaseResult.objects.create(
        run=run,
        response=response,
        probe=probe,
        passed=False,
        risk_score=1.0,
        weighted_risk=1.0,
        case={"probe_id": probe.probe_id, "explanation": EXPLANATION},
    )
    return run


def _download(run: EvaluationRun, user: Any, *, web: bool = False) -> bytes:
    client = Client()
    if user is not None:
        client.force_login(user)
    got = client.get(f"/runs/{run.pk}/bundle/" if web else f"/api/runs/{run.pk}/bundle/")
    assert got.status_code == 200, got.content[:200]
    return got.content


def _carries_inputs(data: bytes) -> bool:
    text = _text(data)
    return "MODEL-OUTPUT-7f3a" in text


def test_public_bundles_carry_inputs_as_the_phase_decides(
    probe_run: EvaluationRun, people: dict[str, Any], settings: Any
) -> None:
    # No phase: the benchmark's default, what the public pages show (no response text).
    assert not _carries_inputs(_download(probe_run, None))
    assert not _carries_inputs(_download(probe_run, people["rival"]))
    assert _carries_inputs(_download(probe_run, people["owner"]))
    assert _carries_inputs(_download(probe_run, people["staff"]))
    run_json = _members(_download(probe_run, None))[bundles.RUN]
    assert '"inputs": "shown"' in run_json

    now = timezone.now()
    phase = Phase.objects.create(
        benchmark="probes",
        suite=probe_run.probe_submission.suite,  # type: ignore[union-attr]
        name="Final",
        slug="final",
        starts_at=now - timedelta(days=2),
        ends_at=now + timedelta(days=1),
        bundle_inputs=BundleInputs.AFTER_END,
    )
    EvaluationRun.objects.filter(pk=probe_run.pk).update(phase=phase)
    probe_run.refresh_from_db()
    assert not _carries_inputs(_download(probe_run, None))  # the phase has not ended
    assert _carries_inputs(_download(probe_run, people["owner"]))
    Phase.objects.filter(pk=phase.pk).update(ends_at=now - timedelta(hours=1))
    probe_run.refresh_from_db()
    assert _carries_inputs(_download(probe_run, None))  # ended: all of it
    Phase.objects.filter(pk=phase.pk).update(bundle_inputs=BundleInputs.NEVER)
    probe_run.refresh_from_db()
    assert not _carries_inputs(_download(probe_run, None))
    assert _carries_inputs(_download(probe_run, people["owner"]))
    Phase.objects.filter(pk=phase.pk).update(bundle_inputs=BundleInputs.DEFAULT)
    settings.RUN_BUNDLE_INPUTS = {"probes": "all"}
    probe_run.refresh_from_db()
    assert _carries_inputs(_download(probe_run, None))


def test_a_withheld_bundle_still_verifies_what_it_carries(probe_run: EvaluationRun) -> None:
    data = selector.run_bundle(run=probe_run, inputs=selector.NONE)
    bundle = bundles.read_bundle(data)
    assert bundle.tampered == ()
    responses = bundle.get(bundles.INPUTS)["responses"]
    assert responses and all("output" not in r for r in responses)
    case = bundle.get(bundles.VERDICTS)["cases"][0]["case"]
    assert case["explanation"] == selector.INPUTS_WITHHELD


def test_the_judge_travels_by_name_model_and_server_only(
    probe_run: EvaluationRun, people: dict[str, Any]
) -> None:
    for user in (None, people["owner"], people["staff"]):
        data = _download(probe_run, user)
        text = _text(data)
        assert "private-gateway" not in text and "8443" not in text, user
        assert "HOUSE_JUDGE_KEY" not in text and "/srv/private" not in text, user
        run = bundles.read_bundle(data).get(bundles.RUN)
        record = run["judge_record"]
        assert (record["name"], record["model"], record["base_url"]) == (
            "house-judge",
            "judge-model-1",
            "https://judge.example.org",
        )
        assert run["judge"] == "replay"
        assert run["judge_config"]["request"]["probe"]["base_url"] == "https://judge.example.org"


@pytest.mark.parametrize(
    ("base_url", "named"),
    [
        ("https://alice:s3cret@judge.example.org/v1", "a user name or password"),
        ("https://sk-abc@judge.example.org/v1", "a user name or password"),
        ("https://judge.example.org/v1?api-key=abc", "'api-key'"),
        ("https://judge.example.org/v1?token=abc&x=1", "'token'"),
    ],
)
def test_credentials_in_a_judge_url_are_refused(base_url: str, named: str) -> None:
    with pytest.raises(JudgeRecordError, match=rf"^base_url: holds (the query parameter )?{named}"):
        judge_record_create(name="leaky", base_url=base_url)
    with pytest.raises(CommandError, match="base_url: holds"):
        call_command("judge_add", "leaky", "--base-url", base_url, stdout=io.StringIO())
    staff = get_user_model().objects.create_superuser("admin", "admin@example.org", "pw")
    client = Client()
    client.force_login(staff)
    got = client.post(
        "/admin/benchmarks_app/judgerecord/add/",
        {"name": "leaky", "kind": "openai", "base_url": base_url, "api_key_env": "OPENAI_API_KEY"},
    )
    assert got.status_code == 200 and "holds" in got.content.decode()
    assert not JudgeRecord.objects.filter(name="leaky").exists()
    # A URL without credentials is kept as given.
    assert judge_record_create(name="fine", base_url="https://judge.example.org/v1?x=1")


def test_an_ended_runs_bundle_is_built_once_per_variant(
    probe_run: EvaluationRun, people: dict[str, Any]
) -> None:
    builds = mock.patch("benchmarks_app.services.run_bundles.run_bundle", wraps=selector.run_bundle)
    with builds as counted:
        first = _download(probe_run, None, web=True)
        again = _download(probe_run, None)
        assert counted.call_count == 1 and first == again
        # The stored file respects the viewer: the entrant's variant is built once too.
        mine = _download(probe_run, people["owner"], web=True)
        assert counted.call_count == 2 and _carries_inputs(mine) and not _carries_inputs(first)
        assert _download(probe_run, people["owner"]) == mine
        assert not _carries_inputs(_download(probe_run, people["rival"]))
        assert counted.call_count == 2
        # A run resumed and ended again is a new bundle, never the stale file.
        EvaluationRun.objects.filter(pk=probe_run.pk).update(
            updated_at=timezone.now() + timedelta(seconds=5)
        )
        probe_run.refresh_from_db()
        _download(probe_run, None)
        assert counted.call_count == 3
    # An active run has no bundle, and none is stored for it.
    EvaluationRun.objects.filter(pk=probe_run.pk).update(status=RunStatus.RUNNING)
    assert Client().get(f"/runs/{probe_run.pk}/bundle/").status_code == 409


def test_the_web_download_is_throttled_like_the_api(
    probe_run: EvaluationRun, settings: Any
) -> None:
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "3/min", "user": "5/min"}
    settings.REST_FRAMEWORK = rest
    client = Client()
    codes = [client.get(f"/runs/{probe_run.pk}/bundle/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    refused = client.get(f"/runs/{probe_run.pk}/bundle/")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    # One budget for both routes: the API answers 429 to this client too.
    assert client.get(f"/api/runs/{probe_run.pk}/bundle/").status_code == 429
