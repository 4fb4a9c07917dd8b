"""The REST API under /api/ (namespace ``api``).

Endpoints that span the benchmarks (index, runs, own submissions) come from
:mod:`benchmarks_app.api.shared`; each benchmark's own endpoints (``api:<bench>-...``, among
them ``api:<bench>-leaderboard``, and the audit scanners and repos) from its module.
"""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from benchmarks_app.api import runs as api_runs
from benchmarks_app.api import shared
from benchmarks_app.api.auth import token_view
from benchmarks_app.api.checklist_extract import ChecklistExtractView
from benchmarks_app.api.judges import (
    AuditBoardAgreementView,
    JudgeAgreementView,
    ProbeBoardAgreementView,
)
from benchmarks_app.api.paired import PairedCompareView
from benchmarks_app.api.schema_view import CachedSchemaView

app_name = "api"
urlpatterns = [
    path("", shared.ApiRootView.as_view(), name="root"),
    path("schema/", CachedSchemaView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file (?script), not inline: the
    # Content-Security-Policy runs no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("auth/token/", token_view, name="token"),
    path("benchmarks/", shared.BenchmarkListView.as_view(), name="benchmark-list"),
    path("runs/", shared.RunListView.as_view(), name="run-list"),
    path("runs/<int:pk>/", shared.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int:pk>/items/", api_runs.RunItemsView.as_view(), name="run-items"),
    path("runs/<int:pk>/cancel/", api_runs.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<int:pk>/resume/", api_runs.RunResumeView.as_view(), name="run-resume"),
    path("runs/<int:pk>/bundle/", api_runs.RunBundleView.as_view(), name="run-bundle"),
    path("submissions/", shared.OwnSubmissionListView.as_view(), name="submission-list"),
    path("boards/compare/", PairedCompareView.as_view(), name="board-compare"),
    path("judges/agreement/", JudgeAgreementView.as_view(), name="judge-agreement"),
    path(
        "audit/leaderboard/agreement/",
        AuditBoardAgreementView.as_view(),
        name="audit-leaderboard-agreement",
    ),
    path(
        "probes/leaderboard/agreement/",
        ProbeBoardAgreementView.as_view(),
        name="probes-leaderboard-agreement",
    ),
    path("audit/", include("benchmarks_app.api.audit")),
    path("probes/", include("benchmarks_app.api.probes")),
    path("checklist/extract/", ChecklistExtractView.as_view(), name="checklist-extract"),
    path("checklist/", include("benchmarks_app.api.checklist")),
    path("webhooks/", include("benchmarks_app.api.notifications")),
    path("checklist/", include("benchmarks_app.api.checklist_actions")),
]
