from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Evaluation platform — curation"
admin.site.site_title = "Evaluation platform admin"
admin.site.index_title = "Ground truth, submissions and runs"

# Uploaded files (papers, result files) are never served from MEDIA_URL: adversarial papers
# must stay private, so downloads go through views that check visibility.
urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("benchmarks_app.api.urls")),
    path("", include("benchmarks_app.urls")),
]
