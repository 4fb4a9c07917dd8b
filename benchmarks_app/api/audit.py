"""Audit API: scanners, repos, leaderboard, per-scanner report, and result submission.

Scanners are public; repos show their public fields, and their ground-truth descriptions
only where visible (``api:repo-detail``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import django_filters
from django import forms
from django.db.models import Prefetch, QuerySet
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.exceptions import (
    NotFound,
    ValidationError,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.audit_board import (
    RELEASE_PARAMETERS,
    LeaderboardView,
    board_params,
)
from benchmarks_app.api.audit_submit import (
    DatasetSubmitView,
    RunChooseView,
    ScannerDescriptionSerializer,
    SubmitResultsView,
    scanner_describe,
)
from benchmarks_app.formatting import MAX_ID, whole_number
from benchmarks_app.models import Repo, Scanner
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit import ReportNotFound, audit_report
from benchmarks_app.selectors.audit_boards import (
    audit_boards,
    published_release,
)
from benchmarks_app.selectors.visibility import (
    truth_findings_redacted,
    visible_repos,
    visible_scanners,
)
from scoring.audit.metrics import severity_counts

# --- Scanners and repos ------------------------------------------------------------------


class ScannerSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:scanner-detail")
    run_count = serializers.IntegerField(read_only=True)
    scan_result_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Scanner
        fields = ["id", "url", "name", "description", "is_baseline", "run_count"]
        fields += ["scan_result_count"]
        fields += ["created_at"]
        read_only_fields = fields


class ScannerFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Scanner
        fields = ["name"]


def _scanners(user: Any) -> QuerySet[Scanner]:
    # The owner is not exposed: scanners are public, who runs them is not. A hidden phase's
    # entrants are not, until it is revealed.
    return visible_scanners(user)


class ScannerListView(generics.ListAPIView):
    """AI auditing tools whose findings are scored."""

    serializer_class = ScannerSerializer
    filterset_class = ScannerFilter
    ordering_fields = ["name", "created_at", "run_count"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Scanner]:
        return _scanners(self.request.user)


class ScannerDetailView(generics.RetrieveAPIView):
    """One scanner; its owner (or staff) may change its description with ``PATCH``."""

    serializer_class = ScannerSerializer

    def get_queryset(self) -> QuerySet[Scanner]:
        return _scanners(self.request.user)

    @extend_schema(request=ScannerDescriptionSerializer, responses=ScannerSerializer)
    def patch(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        scanner_describe(request, self.get_object())
        return self.retrieve(request, *args, **kwargs)


class RepoSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:repo-detail")
    truth_count = serializers.IntegerField(read_only=True)
    scan_result_count = serializers.IntegerField(read_only=True)
    # Blank when unknown, so not a "uri" in the schema.
    repository_url = serializers.CharField(read_only=True)

    class Meta:
        model = Repo
        fields = [
            "id",
            "url",
            "project_id",
            "name",
            "platform",
            "repository_url",
            "is_public",
            "truth_count",
            "scan_result_count",
            "created_at",
        ]
        read_only_fields = fields


class TruthFindingPublicSerializer(serializers.Serializer):
    finding_id = serializers.CharField()
    severity = serializers.CharField()
    title = serializers.CharField(
        source="visible_title",
        allow_null=True,
        help_text="Only for repos marked public (and for staff); null otherwise.",
    )
    category = serializers.CharField(source="visible_category", allow_null=True)
    description = serializers.CharField(
        source="visible_description",
        allow_null=True,
        help_text="Only for repos marked public (and for staff); null otherwise.",
    )


class RepoDetailSerializer(RepoSerializer):
    truth_findings = TruthFindingPublicSerializer(many=True, read_only=True)
    truth_severity_counts = serializers.SerializerMethodField(
        help_text="Current truth findings per severity (shown for hidden repos too)."
    )

    class Meta(RepoSerializer.Meta):
        fields = [
            *RepoSerializer.Meta.fields,
            "contract_files",
            "truth_severity_counts",
            "truth_findings",
        ]
        read_only_fields = fields

    def get_truth_severity_counts(self, repo: Repo) -> dict[str, int]:
        return severity_counts(t.severity for t in repo.truth_findings.all())


class StrictBooleanField(forms.NullBooleanField):
    """``true`` or ``false`` (or absent); anything else is a 400, not silently no filter."""

    widget = forms.TextInput  # the raw text: NullBooleanSelect turns junk into "unknown"

    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]
        if value in (None, ""):
            return None
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise forms.ValidationError("Must be true or false.", code="invalid")

    def validate(self, value: Any) -> None:
        return None


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class RepoFilter(django_filters.FilterSet):
    platform = django_filters.CharFilter(lookup_expr="iexact")
    is_public = StrictBooleanFilter()
    search = django_filters.CharFilter(method="filter_search", label="Project id or name")

    class Meta:
        model = Repo
        fields = ["platform", "is_public"]

    def filter_search(self, qs: QuerySet[Repo], name: str, value: str) -> QuerySet[Repo]:
        return qs.filter(project_id__icontains=value) | qs.filter(name__icontains=value)


class RepoListView(generics.ListAPIView):
    """Audited repos (public fields; ground-truth descriptions are not part of the list)."""

    serializer_class = RepoSerializer
    filterset_class = RepoFilter
    ordering_fields = ["project_id", "name", "platform", "created_at", "truth_count"]
    ordering = ["project_id"]

    def get_queryset(self) -> QuerySet[Repo]:
        return visible_repos(self.request.user).with_counts()  # type: ignore[attr-defined]


class RepoDetailView(generics.RetrieveAPIView):
    """One repo with its ground-truth findings; descriptions only where the repo is public."""

    serializer_class = RepoDetailSerializer

    def get_queryset(self) -> QuerySet[Repo]:
        findings = truth_findings_redacted(self.request.user).filter(is_current=True)
        return (
            visible_repos(self.request.user)
            .with_counts()  # type: ignore[attr-defined]
            .prefetch_related(Prefetch("truth_findings", queryset=findings.order_by("order", "id")))
        )


# --- Leaderboard, reports, result uploads ------------------------------------------------
# The leaderboard itself (rows, orderings, parameters) is in api/audit_board.py.


class BoardSerializer(serializers.Serializer):
    dataset = serializers.CharField()
    release = serializers.IntegerField()
    judge = serializers.CharField()
    rows = serializers.IntegerField(help_text="Scanners on the board.")
    official = serializers.BooleanField(help_text="The board the site shows first.")
    url = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, board: dict[str, Any]) -> str:
        query = urlencode(
            {"dataset": board["dataset"], "release": board["release"], "judge": board["judge"]}
        )
        url = f"{reverse('api:audit-leaderboard')}?{query}"
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url


class BoardListView(generics.ListAPIView):
    """Every audit board with rows (one per dataset release and judge), official ones marked."""

    serializer_class = BoardSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return audit_boards()


class DatasetSerializer(serializers.ModelSerializer):
    official_release = serializers.SerializerMethodField()
    releases = serializers.SerializerMethodField()
    repos = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        many=True, read_only=True, slug_field="project_id"
    )
    submit_url = serializers.SerializerMethodField()

    class Meta:
        model = AuditDataset
        fields = [
            "slug",
            "name",
            "description",
            "official_release",
            "official_judge",
            "releases",
            "repos",
            "submit_url",
        ]
        read_only_fields = fields

    def get_official_release(self, dataset: AuditDataset) -> int | None:
        release = published_release(dataset)
        return release.number if release is not None else None

    def get_releases(self, dataset: AuditDataset) -> list[int]:
        return sorted(r.number for r in dataset.releases.all() if r.is_published)

    @extend_schema_field(OpenApiTypes.URI)
    def get_submit_url(self, dataset: AuditDataset) -> str:
        url = reverse("api:audit-dataset-submit", args=[dataset.slug])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url


class DatasetListView(generics.ListAPIView):
    """Audit datasets: their repos, published releases and the official release and judge."""

    serializer_class = DatasetSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[AuditDataset]:
        return AuditDataset.objects.select_related("official_release").prefetch_related(
            "releases", "repos"
        )


class ReportView(APIView):
    """The JSON document of ``manage.py audit_report`` for one scanner."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "run",
                {"type": "integer", "minimum": 0, "maximum": MAX_ID},
                description="one run instead of a board row",
            ),
            *RELEASE_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, scanner: str) -> Response:
        run = request.query_params.get("run")
        run_id = whole_number(run) if run is not None else None
        if run is not None and run_id is None:
            raise ValidationError({"run": "must be a run id (an integer)"})
        board = board_params(request, phase=False)
        try:
            report = audit_report(
                scanner_name=scanner,
                run_id=run_id,
                user=request.user,
                **board,
            )
        except ReportNotFound as exc:
            raise NotFound(str(exc)) from None
        return Response(report)


urlpatterns = [
    path("scanners/", ScannerListView.as_view(), name="scanner-list"),
    path("scanners/<int:pk>/", ScannerDetailView.as_view(), name="scanner-detail"),
    path("repos/", RepoListView.as_view(), name="repo-list"),
    path("repos/<int:pk>/", RepoDetailView.as_view(), name="repo-detail"),
    path("leaderboard/", LeaderboardView.as_view(), name="audit-leaderboard"),
    path("boards/", BoardListView.as_view(), name="audit-boards"),
    path("datasets/", DatasetListView.as_view(), name="audit-datasets"),
    path(
        "datasets/<slug:slug>/results/",
        DatasetSubmitView.as_view(),
        name="audit-dataset-submit",
    ),
    path("reports/<str:scanner>/", ReportView.as_view(), name="audit-report"),
    path("runs/<int:pk>/choose/", RunChooseView.as_view(), name="audit-run-choose"),
    path("repos/<str:project_id>/results/", SubmitResultsView.as_view(), name="audit-submit"),
]
