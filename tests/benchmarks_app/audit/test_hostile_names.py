"""A scanner whose name looks like an existing one is refused (issue 11 item 8)."""

from __future__ import annotations

import pytest

from benchmarks_app.models import Scanner
from benchmarks_app.services.audit.runs import AuditRunError
from benchmarks_app.services.audit.submissions import _submit_scanner_name, audit_scan_submit
from tests.factories.common import RepoFactory, ScannerFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("look_alike", ["b\u0430seline", "Baseline", "BASEL\u0399NE"])
def test_look_alike_scanner_name_is_refused(look_alike: str) -> None:
    ScannerFactory.create(name="baseline", owner=None)
    user = UserFactory.create()
    with pytest.raises(AuditRunError, match="looks like the existing scanner 'baseline'"):
        audit_scan_submit(
            user=user,
            scanner_name=look_alike,
            repo=RepoFactory.create(),
            data={"findings": [{"title": "Reentrancy", "severity": "high"}]},
        )
    assert list(Scanner.objects.values_list("name", flat=True)) == ["baseline"]


def test_distinct_names_and_the_exact_name_still_pass() -> None:
    owner = UserFactory.create()
    ScannerFactory.create(name="baseline", owner=owner)
    assert _submit_scanner_name(user=owner, scanner_name="baseline") == "baseline"
    assert _submit_scanner_name(user=owner, scanner_name="baseline-2") == "baseline-2"
