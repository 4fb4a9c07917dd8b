from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from benchmarks_app.views import ops

# The admin modules load with the URLconf: the admin's app config leaves them out of
# processes that serve no page (benchmarks_app.apps.GroupedAdminConfig).
admin.autodiscover()

admin.site.site_header = "Evaluation platform — curation"
admin.site.site_title = "Evaluation platform admin"
admin.site.index_title = "Ground truth, submissions and runs"

# Uploaded files (papers, result files) are never served from MEDIA_URL: adversarial papers
# must stay private, so downloads go through views that check visibility.
urlpatterns = [
    path("admin/", admin.site.urls),
    # Polled by load balancers, Kubernetes and Prometheus (README "Scaling out").
    path("health/", ops.health, name="health"),
    path("health/queue/", ops.health_queue, name="health-queue"),
    path("metrics", ops.metrics, name="metrics"),
    path("api/", include("benchmarks_app.api.urls")),
    path("", include("benchmarks_app.urls")),
]
