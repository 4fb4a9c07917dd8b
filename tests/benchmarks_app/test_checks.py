"""The start-up check of PostgreSQL's connection budget (issue 40, item 3): N clusters x W
workers need at most N x (W x (2 x RUN_PIECES_PER_PROCESS + 1) + 4) connections, and
``qcluster`` / ``manage.py check --database default`` warn when ``max_connections`` (less the
superuser reserve) is below that."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from benchmarks_app.checks import (
    CONNECTIONS_SHORT,
    connection_budget_warnings,
    connections_needed,
)


def test_the_budget_formula_of_the_readme() -> None:
    # The README's figures: 70 per default cluster, 140 for two, 38 per cluster at 8 pieces.
    assert connections_needed(clusters=1, workers=2, pieces_per_process=16) == 70
    assert connections_needed(clusters=2, workers=2, pieces_per_process=16) == 140
    assert connections_needed(clusters=1, workers=2, pieces_per_process=8) == 38


@pytest.mark.django_db
def test_no_warning_on_sqlite_nor_within_the_budget(settings: Any) -> None:
    settings.Q_CLUSTERS = 1
    settings.RUN_PIECES_PER_PROCESS = 1
    assert connection_budget_warnings() == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_server_with_too_few_connections_is_warned_about(settings: Any, capsys: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's max_connections")
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        limit = int(cursor.fetchone()[0])
    settings.Q_CLUSTERS = limit  # a cluster per connection: far more than the server has
    (warning,) = connection_budget_warnings()
    assert warning.id == CONNECTIONS_SHORT
    assert f"{limit} cluster(s)" in warning.msg
    assert "RUN_PIECES_PER_PROCESS" in (warning.hint or "")
    call_command("check", "--database", "default")
    assert CONNECTIONS_SHORT in capsys.readouterr().err
