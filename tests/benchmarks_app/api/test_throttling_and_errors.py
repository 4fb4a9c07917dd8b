"""Rate limits and the error shape shared by every endpoint."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions

from benchmarks_app.api.exceptions import exception_handler
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rates(settings):
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "3/min", "user": "5/min"}
    settings.REST_FRAMEWORK = rest


def test_anonymous_clients_are_throttled(api, low_rates):
    codes = [api.get("/api/runs/").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    throttled = api.get("/api/benchmarks/")
    assert throttled.status_code == 429
    body = throttled.json()
    assert body["code"] == "throttled"
    assert body["errors"][0]["field"] is None
    assert 0 < body["retry_after_s"] <= 60
    assert int(throttled["Retry-After"]) == body["retry_after_s"]


def test_authenticated_clients_have_their_own_higher_limit(api, low_rates):
    for _ in range(3):
        api.get("/api/runs/")
    assert api.get("/api/runs/").status_code == 429  # this IP is spent as anonymous
    user = UserFactory.create()
    api.force_authenticate(user)
    codes = [api.get("/api/runs/").status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
    api.force_authenticate(UserFactory.create())
    assert api.get("/api/runs/").status_code == 200  # counted per user, not per IP


def test_default_rates_leave_room_for_normal_use(api):
    assert all(api.get("/api/runs/").status_code == 200 for _ in range(10))


def _handle(exc: Exception):
    response = exception_handler(exc, {"view": None, "request": None})
    assert response is not None
    return response.status_code, response.data


def test_nested_validation_errors_are_flattened_with_dotted_fields():
    status, body = _handle(
        exceptions.ValidationError(
            {
                "findings": [{}, {"severity": ["Unknown severity 'Huge'."]}],
                "non_field_errors": ["Submit at least one finding."],
                "repo": ["This field is required."],
            }
        )
    )
    assert status == 400
    assert body["errors"] == [
        {"field": "findings.1.severity", "reason": "Unknown severity 'Huge'.", "code": "invalid"},
        {"field": None, "reason": "Submit at least one finding.", "code": "invalid"},
        {"field": "repo", "reason": "This field is required.", "code": "invalid"},
    ]
    assert body["detail"].startswith("findings.1.severity: Unknown severity")


def test_django_errors_raised_in_services_become_json_not_500():
    status, body = _handle(DjangoValidationError({"file": ["Not a LaTeX source."]}))
    assert status == 400
    assert body["errors"][0]["field"] == "file"
    assert body["errors"][0]["reason"] == "Not a LaTeX source."
    status, body = _handle(DjangoValidationError("Quota exceeded."))
    assert (status, body["errors"][0]["field"]) == (400, None)
    status, body = _handle(Http404("nope"))
    assert (status, body["code"]) == (404, "not_found")


def test_unexpected_exceptions_are_left_to_django():
    assert exception_handler(RuntimeError("boom"), {"view": None, "request": None}) is None
