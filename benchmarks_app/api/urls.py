"""The REST API under /api/ (namespace ``api``).

Shared endpoints come from :mod:`benchmarks_app.api.common`; each benchmark's own endpoints
(``api:<bench>-...``, among them ``api:<bench>-leaderboard``) from its module.
"""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authtoken.views import obtain_auth_token

from benchmarks_app.api import common

app_name = "api"
urlpatterns = [
    path("", common.ApiRootView.as_view(), name="root"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("auth/token/", obtain_auth_token, name="token"),
    path("benchmarks/", common.BenchmarkListView.as_view(), name="benchmark-list"),
    path("runs/", common.RunListView.as_view(), name="run-list"),
    path("runs/<int:pk>/", common.RunDetailView.as_view(), name="run-detail"),
    path("submissions/", common.OwnSubmissionListView.as_view(), name="submission-list"),
    # Audit reference data shared by every scanner; the audit module adds its own routes
    # (leaderboard, reports, result uploads) under the same prefix.
    path("audit/scanners/", common.ScannerListView.as_view(), name="scanner-list"),
    path("audit/scanners/<int:pk>/", common.ScannerDetailView.as_view(), name="scanner-detail"),
    path("audit/repos/", common.RepoListView.as_view(), name="repo-list"),
    path("audit/repos/<int:pk>/", common.RepoDetailView.as_view(), name="repo-detail"),
    path("audit/", include("benchmarks_app.api.audit")),
    path("probes/", include("benchmarks_app.api.probes")),
    path("checklist/", include("benchmarks_app.api.checklist")),
]
