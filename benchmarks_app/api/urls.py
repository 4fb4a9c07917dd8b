from __future__ import annotations

from django.urls import include, path

app_name = "api"
urlpatterns = [
    path("audit/", include("benchmarks_app.api.audit")),
    path("probes/", include("benchmarks_app.api.probes")),
    path("checklist/", include("benchmarks_app.api.checklist")),
]
