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

from benchmarks_app.api.audit_submit import DatasetSubmitView, SubmitResultsView
from benchmarks_app.api.leaderboard import LeaderboardListView, ordering_parameter
from benchmarks_app.models import Repo, Scanner
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit import ReportNotFound, audit_report
from benchmarks_app.selectors.audit_boards import (
    PUBLIC_ROW_KEYS,
    BoardNotFound,
    audit_boards,
    board_document,
    published_release,
    resolve_board,
)
from benchmarks_app.selectors.visibility import truth_findings_redacted, visible_repos
from scoring.audit.metrics import severity_counts

# --- Scanners and repos ------------------------------------------------------------------


class ScannerSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:scanner-detail")
    run_count = serializers.IntegerField(read_only=True)
    scan_result_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Scanner
        fields = ["id", "url", "name", "description", "run_count", "scan_result_count"]
        fields += ["created_at"]
        read_only_fields = fields


class ScannerFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Scanner
        fields = ["name"]


def _scanners() -> QuerySet[Scanner]:
    # The owner is not exposed: scanners are public, who runs them is not.
    return Scanner.objects.with_counts()


class ScannerListView(generics.ListAPIView):
    """AI auditing tools whose findings are scored."""

    serializer_class = ScannerSerializer
    filterset_class = ScannerFilter
    ordering_fields = ["name", "created_at", "run_count"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Scanner]:
        return _scanners()


class ScannerDetailView(generics.RetrieveAPIView):
    serializer_class = ScannerSerializer

    def get_queryset(self) -> QuerySet[Scanner]:
        return _scanners()


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


class AuditLeaderboardRowSerializer(serializers.Serializer):
    """One scanner on one board (a dataset release and a judge); counts summed over repos."""

    scanner = serializers.CharField(help_text="Scanner name.")
    rank = serializers.IntegerField(
        allow_null=True,
        help_text="By F1 with partial, then F1; equal numbers share a rank. Null: incomplete.",
    )
    rank_low = serializers.IntegerField(
        allow_null=True, help_text="Best rank the 95% intervals allow."
    )
    rank_high = serializers.IntegerField(
        allow_null=True, help_text="Worst rank the 95% intervals allow."
    )
    complete = serializers.BooleanField(help_text="Evaluated on every repo of the release.")
    repos_evaluated = serializers.IntegerField()
    repos_total = serializers.IntegerField(help_text="Repos in the release.")
    tp = serializers.IntegerField(help_text="Exact matches (true positives).")
    partial = serializers.IntegerField(  # type: ignore[assignment]
        help_text="Partial matches: right contract, function and core issue."
    )
    fp = serializers.IntegerField(help_text="Reported findings matching nothing.")
    fn = serializers.IntegerField(help_text="Verified findings not found.")
    precision = serializers.FloatField(allow_null=True, help_text="TP / reported, in [0, 1].")
    recall = serializers.FloatField(allow_null=True, help_text="TP / verified, in [0, 1].")
    f1 = serializers.FloatField(allow_null=True)
    f1_with_partial = serializers.FloatField(allow_null=True, help_text="The ranking metric.")
    f1_with_partial_ci = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text="95% percentile bootstrap interval [low, high] over truth findings.",
    )


AUDIT_ORDERING = [k for k in PUBLIC_ROW_KEYS if k != "f1_with_partial_ci"]
# Older clients order by ``repos``: the repos evaluated.
ORDERING_ALIASES = {"repos": "repos_evaluated"}


def _board_params(request: Request) -> dict[str, str | None]:
    params = {k: request.query_params.get(k) or None for k in ("dataset", "release", "judge")}
    release = params["release"]
    if release is not None and not (release.isascii() and release.isdigit()):
        raise ValidationError({"release": "must be a release number (an integer)"})
    return params


BOARD_PARAMETERS = [
    OpenApiParameter("dataset", str, description="dataset slug (default: the site's first)"),
    OpenApiParameter(
        "release",
        {"type": "integer", "minimum": 0},
        description="release number (default: the dataset's official release)",
    ),
    OpenApiParameter(
        "judge", str, description="offline, openai:MODEL or replay:DIR (default: official)"
    ),
]


class LeaderboardView(LeaderboardListView):
    """One audit board: a dataset release and a judge (default: the official ones).

    The rows of ``manage.py audit_leaderboard --format json``: ranked scanners (evaluated on
    every repo of the release) first, then incomplete ones, unranked. Paginated (`page`,
    `page_size`); `ordering` re-orders the rows, keeping their rank.
    """

    serializer_class = AuditLeaderboardRowSerializer
    ordering_fields = [*AUDIT_ORDERING, *ORDERING_ALIASES]

    @extend_schema(
        parameters=[*BOARD_PARAMETERS, ordering_parameter([*AUDIT_ORDERING, "repos"], "rank")]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def ordering_alias(self, field: str) -> str:
        return ORDERING_ALIASES.get(field, field)

    def get_rows(self) -> list[dict[str, Any]]:
        try:
            board = resolve_board(**_board_params(self.request))
        except BoardNotFound as exc:
            field, _, message = str(exc).partition(": ")
            raise NotFound({field: message}) from None
        return board_document(board)["rows"]


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


MAX_ID = 2**63 - 1


class ReportView(APIView):
    """The JSON document of ``manage.py audit_report`` for one scanner."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "run",
                {"type": "integer", "minimum": 0, "maximum": MAX_ID},
                description="one run instead of a board row",
            ),
            *BOARD_PARAMETERS,
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, scanner: str) -> Response:
        run = request.query_params.get("run")
        if run is not None and not (run.isascii() and run.isdigit() and int(run) <= MAX_ID):
            raise ValidationError({"run": "must be a run id (an integer)"})
        board = _board_params(request)
        try:
            report = audit_report(scanner_name=scanner, run_id=int(run) if run else None, **board)
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
    path("repos/<str:project_id>/results/", SubmitResultsView.as_view(), name="audit-submit"),
]
