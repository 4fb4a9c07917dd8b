"""Audit API: scanners, repos, leaderboard, per-scanner report, and result submission.

Scanners are public; repos show their public fields, and their ground-truth descriptions
only where visible (``api:repo-detail``).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import Prefetch, QuerySet
from django.http import QueryDict
from django.shortcuts import get_object_or_404
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import (
    ErrorDetail,
    NotFound,
    PermissionDenied,
    Throttled,
    ValidationError,
)
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.leaderboard import LeaderboardListView, ordering_parameter
from benchmarks_app.models import Repo, Scanner
from benchmarks_app.selectors.audit import ReportNotFound, audit_leaderboard, audit_report
from benchmarks_app.selectors.visibility import truth_findings_redacted, visible_repos
from benchmarks_app.services.audit import (
    AuditQuotaExceeded,
    AuditRunError,
    audit_scan_submit,
    audit_scan_upload,
)

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
    title = serializers.CharField()
    category = serializers.CharField()
    description = serializers.CharField(
        source="visible_description",
        allow_null=True,
        help_text="Only for repos marked public (and for staff); null otherwise.",
    )


class RepoDetailSerializer(RepoSerializer):
    truth_findings = TruthFindingPublicSerializer(many=True, read_only=True)

    class Meta(RepoSerializer.Meta):
        fields = [*RepoSerializer.Meta.fields, "contract_files", "truth_findings"]
        read_only_fields = fields


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
        findings = truth_findings_redacted(self.request.user).order_by("order", "id")
        return (
            visible_repos(self.request.user)
            .with_counts()  # type: ignore[attr-defined]
            .prefetch_related(Prefetch("truth_findings", queryset=findings))
        )


# --- Leaderboard, reports, result uploads ------------------------------------------------


class AuditLeaderboardRowSerializer(serializers.Serializer):
    """One scanner, over each repo's latest complete evaluation; counts summed over repos."""

    rank = serializers.IntegerField(help_text="Position by F1 with partial, then F1, then name.")
    scanner = serializers.CharField(help_text="Scanner name.")
    run_ids = serializers.ListField(
        child=serializers.IntegerField(), help_text="Runs whose results are counted."
    )
    repos = serializers.IntegerField(help_text="Repos evaluated.")
    truth = serializers.IntegerField(help_text="Verified findings in those repos.")
    scan = serializers.IntegerField(help_text="Findings the scanner reported.")
    qa = serializers.IntegerField(help_text="Reported findings of Info / Best Practices severity.")
    tp = serializers.IntegerField(help_text="Exact matches (true positives).")
    partial = serializers.IntegerField(  # type: ignore[assignment]
        help_text="Partial matches: right contract, function and core issue."
    )
    fp = serializers.IntegerField(help_text="Reported findings matching nothing.")
    fn = serializers.IntegerField(help_text="Verified findings not found.")
    precision = serializers.FloatField(help_text="TP / reported, in [0, 1].")
    recall = serializers.FloatField(help_text="TP / verified, in [0, 1].")
    f1 = serializers.FloatField()
    precision_with_partial = serializers.FloatField(
        help_text="(TP + partial) / reported, QA findings left out."
    )
    recall_with_partial = serializers.FloatField(help_text="(TP + partial) / verified.")
    f1_with_partial = serializers.FloatField()
    is_complete = serializers.BooleanField()
    report = serializers.SerializerMethodField(help_text="The scanner's full report.")

    @extend_schema_field(OpenApiTypes.URI)
    def get_report(self, row: dict[str, Any]) -> str | None:
        try:
            url = reverse("api:audit-report", args=[row["scanner"]])
        except NoReverseMatch:  # a name the URL pattern cannot carry
            return None
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url


AUDIT_ORDERING = [
    "rank",
    "scanner",
    "repos",
    "truth",
    "scan",
    "qa",
    "tp",
    "partial",
    "fp",
    "fn",
    "precision",
    "recall",
    "f1",
    "precision_with_partial",
    "recall_with_partial",
    "f1_with_partial",
]


class LeaderboardView(LeaderboardListView):
    """Scanners ranked on each repo's latest complete evaluation (best F1 with partial first).

    Paginated (`page`, `page_size`); `ordering` re-orders the rows, keeping their rank.
    """

    serializer_class = AuditLeaderboardRowSerializer
    ordering_fields = AUDIT_ORDERING

    @extend_schema(parameters=[ordering_parameter(AUDIT_ORDERING, "rank")])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_rows(self) -> list[dict[str, Any]]:
        # The selector's order is the ranking; it does not number its rows itself.
        return [{**row, "rank": i} for i, row in enumerate(audit_leaderboard(), start=1)]


MAX_ID = 2**63 - 1


class ReportView(APIView):
    """The JSON document of ``manage.py audit_report`` for one scanner."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "run",
                {"type": "integer", "minimum": 0, "maximum": MAX_ID},
                description="one run instead of the latest",
            )
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, scanner: str) -> Response:
        run = request.query_params.get("run")
        if run is not None and not (run.isascii() and run.isdigit() and int(run) <= MAX_ID):
            raise ValidationError({"run": "must be a run id (an integer)"})
        try:
            report = audit_report(scanner_name=scanner, run_id=int(run) if run else None)
        except ReportNotFound as exc:
            raise NotFound(str(exc)) from None
        return Response(report)


class SubmitResultsView(APIView):
    """Upload a scanner's results for one repo and queue their evaluation.

    Either a JSON body holding the results in any accepted shape (a list of findings, or
    ``{project, findings: [...], token_usage, ...}``), or a multipart form with the results
    as a JSON ``file`` (what the web form sends). The scanner's name comes from
    ``?scanner=NAME``, a ``scanner`` form field, or a top-level ``"scanner"`` key; the judge
    (``offline`` or ``openai``) from ``?judge=`` or a ``judge`` form field. Answers 202 with
    the queued run; 403 when the scanner name belongs to somebody else.
    """

    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(
        parameters=[
            OpenApiParameter("scanner", str, description="scanner name"),
            OpenApiParameter("judge", str, description="offline or openai (default: the site's)"),
        ],
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, project_id: str) -> Response:
        repo = get_object_or_404(visible_repos(request.user), project_id=project_id)
        data: Any = request.data
        scanner = request.query_params.get("scanner", "")
        judge = request.query_params.get("judge") or None
        upload = None
        if isinstance(data, QueryDict):  # multipart or urlencoded form
            scanner = scanner or data.get("scanner", "")
            judge = judge or data.get("judge") or None
            upload = request.FILES.get("file")
            if upload is None:
                raise ValidationError(
                    {"file": "upload the results as a JSON file, or send them as a JSON body"}
                )
        elif isinstance(data, dict) and "scanner" in data:
            scanner = scanner or str(data.get("scanner") or "")
            data = {k: v for k, v in data.items() if k != "scanner"}
        if not scanner:
            raise ValidationError({"scanner": "give the scanner's name (?scanner=NAME)"})
        try:
            if upload is not None:
                run = audit_scan_upload(
                    user=request.user, scanner_name=scanner, repo=repo, upload=upload, judge=judge
                )
            else:
                run = audit_scan_submit(
                    user=request.user, scanner_name=scanner, repo=repo, data=data, judge=judge
                )
        except PermissionError as exc:
            field, _, message = str(exc).partition(": ")
            raise PermissionDenied({field: message} if message else str(exc)) from None
        except AuditQuotaExceeded as exc:
            wait = (exc.quota.resets_at - timezone.now()).total_seconds()
            throttled = Throttled(wait=max(wait, 1))  # 429 with Retry-After
            field, _, message = str(exc).partition(": ")
            throttled.detail = {field: [ErrorDetail(message or str(exc), code="throttled")]}
            raise throttled from None
        except AuditRunError as exc:
            field, _, message = str(exc).partition(": ")
            raise ValidationError({field if message else "detail": message or str(exc)}) from None
        run.refresh_from_db()
        name = run.scanner.name if run.scanner else scanner
        return Response(
            {
                "run": run.pk,
                "status": run.status,
                "scanner": name,
                "repo": repo.project_id,
                "findings": repo.scan_results.get(
                    scanner__name=name, is_current=True
                ).findings.count(),
                "run_url": request.build_absolute_uri(reverse("audit:run", args=[run.pk])),
                "report_url": request.build_absolute_uri(reverse("api:audit-report", args=[name])),
            },
            status=status.HTTP_202_ACCEPTED,
        )


urlpatterns = [
    path("scanners/", ScannerListView.as_view(), name="scanner-list"),
    path("scanners/<int:pk>/", ScannerDetailView.as_view(), name="scanner-detail"),
    path("repos/", RepoListView.as_view(), name="repo-list"),
    path("repos/<int:pk>/", RepoDetailView.as_view(), name="repo-detail"),
    path("leaderboard/", LeaderboardView.as_view(), name="audit-leaderboard"),
    path("reports/<str:scanner>/", ReportView.as_view(), name="audit-report"),
    path("repos/<str:project_id>/results/", SubmitResultsView.as_view(), name="audit-submit"),
]
