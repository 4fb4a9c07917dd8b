"""The OpenAPI schema, the interactive docs, and a fuzz run over every GET operation."""

from __future__ import annotations

import re

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.contrib.staticfiles import finders
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings

from benchmarks_app.models import RunStatus
from tests.factories.common import (
    ChecklistRunFactory,
    ProbeRunFactory,
    RepoFactory,
    RunFactory,
    TruthFindingFactory,
    UserFactory,
    token_for,
)

pytestmark = pytest.mark.django_db
STATIC_PREFIX = "/" + django_settings.STATIC_URL.lstrip("/")


def test_schema_is_openapi_3_and_lists_the_shared_endpoints(api):
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    for expected in (
        "/api/benchmarks/",
        "/api/runs/",
        "/api/runs/{id}/",
        "/api/submissions/",
        "/api/audit/scanners/",
        "/api/audit/repos/{id}/",
        "/api/auth/token/",
    ):
        assert expected in paths
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])
    run_params = {p["name"] for p in schema["paths"]["/api/runs/"]["get"]["parameters"]}
    assert {"benchmark", "status", "ordering", "page", "page_size"} <= run_params


def test_docs_load_their_assets_from_this_site(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("drf_spectacular_sidecar" in a for a in assets), assets
    # No CDN: every script and stylesheet comes from our own static files.
    assert not [a for a in assets if a.startswith(("http:", "https:", "//"))]
    for asset in (a for a in assets if a.startswith(STATIC_PREFIX)):
        assert finders.find(asset.removeprefix(STATIC_PREFIX)), asset


# --- Fuzzing -----------------------------------------------------------------------------


@pytest.fixture
def api_schema(db, settings):
    # As Django's test client does: the test's connection (and its transaction) must
    # survive the end of each request served through the raw WSGI app.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield _schema(settings)
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def _schema(settings):
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "100000/min", "user": "100000/min"}
    settings.REST_FRAMEWORK = rest
    # A little of everything, so detail endpoints and joins have rows to work on.
    repo = RepoFactory.create(is_public=True)
    TruthFindingFactory.create(repo=repo)
    RunFactory.create(status=RunStatus.SUCCEEDED, progress_done=1, progress_total=1)
    ProbeRunFactory.create(status=RunStatus.RUNNING)
    ChecklistRunFactory.create()
    return schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application()).include(
        method="GET"
    )


# Few examples per operation: the suite must stay fast, and every GET is still exercised
# with generated filters, orderings, page numbers and ids on every run.
FUZZ = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)


def _fuzz(schema, headers: dict[str, str]) -> list[str]:
    """Call every GET operation with generated input; the list of operations exercised."""
    seen = []
    for result in schema.get_all_operations():
        operation = result.ok()
        seen.append(operation.label)

        @FUZZ
        @given(case=operation.as_strategy())
        def call(case):
            response = case.call(headers=headers)
            assert response.status_code < 500, (
                case.as_curl_command(),
                response.status_code,
                response.text[:800],
            )

        call()
    return seen


def test_no_get_operation_fails_with_a_server_error(api_schema):
    seen = _fuzz(api_schema, {})
    assert "GET /api/runs/" in seen
    assert len(seen) >= 8


def test_no_get_operation_fails_for_a_logged_in_client(api_schema):
    token = token_for(UserFactory.create(username="fuzzer"))
    seen = _fuzz(api_schema, {"Authorization": f"Token {token}"})
    assert "GET /api/submissions/" in seen
