"""Endpoints that span the three benchmarks: index, benchmark list, runs, own submissions.

Each benchmark's own endpoints (leaderboard, reports, submissions; the audit scanners and
repos too) live in its module (``api/audit.py``, ``api/probes.py``, ``api/checklist.py``).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.urls import NoReverseMatch, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse as api_reverse
from rest_framework.views import APIView

from benchmarks_app.api.filters import StrictBooleanFilter
from benchmarks_app.api.pagination import KeysFirstPagination
from benchmarks_app.formatting import MAX_ID
from benchmarks_app.models import Benchmark, EvaluationRun, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.checklist import checklist_run_votes
from benchmarks_app.selectors.leaderboards import (
    OwnSubmission,
    benchmark_summaries,
    own_submissions,
)
from benchmarks_app.selectors.run_health import run_waiting_reason
from benchmarks_app.selectors.run_metrics import run_metrics
from benchmarks_app.selectors.runs import ended_run_failure_causes, run_judge_usage
from benchmarks_app.selectors.visibility import visible_runs
from scoring.judges import failures


def _maybe_url(request: Request | None, name: str, **kwargs: Any) -> str | None:
    """Absolute URL of a named route, or ``None`` while a benchmark has not defined it yet."""
    try:
        path = reverse(name, kwargs=kwargs or None)
    except NoReverseMatch:
        return None
    return request.build_absolute_uri(path) if request is not None else path


# --- Index -------------------------------------------------------------------------------


class ApiRootView(APIView):
    """Where to start: links to every collection."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        names = {
            "benchmarks": "api:benchmark-list",
            "runs": "api:run-list",
            "scanners": "api:scanner-list",
            "repos": "api:repo-list",
            "my_submissions": "api:submission-list",
            "audit_leaderboard": "api:audit-leaderboard",
            "probes_leaderboard": "api:probes-leaderboard",
            "checklist_leaderboard": "api:checklist-leaderboard",
            "token": "api:token",
            "schema": "api:schema",
            "docs": "api:docs",
        }
        return Response({key: _maybe_url(request, name) for key, name in names.items()})


class BenchmarkSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    run_count = serializers.IntegerField(help_text="Runs visible to you.")
    succeeded_runs = serializers.IntegerField()
    active_runs = serializers.IntegerField(help_text="Queued or running.")
    leaderboard = serializers.SerializerMethodField()
    page = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.URI)
    def get_leaderboard(self, obj: Any) -> str | None:
        return _maybe_url(self.context.get("request"), f"api:{obj.slug}-leaderboard")

    @extend_schema_field(OpenApiTypes.URI)
    def get_page(self, obj: Any) -> str | None:
        request = self.context.get("request")
        path = f"/{obj.slug}/"
        return request.build_absolute_uri(path) if request is not None else path


class BenchmarkListView(APIView):
    """The three benchmarks, with links to their leaderboards."""

    @extend_schema(responses=BenchmarkSerializer(many=True))
    def get(self, request: Request) -> Response:
        data = BenchmarkSerializer(
            benchmark_summaries(request.user), many=True, context={"request": request}
        ).data
        return Response(data)


# --- Runs --------------------------------------------------------------------------------


class RunSerializer(serializers.ModelSerializer):
    target = serializers.CharField(source="target_label", read_only=True)
    target_id = serializers.SerializerMethodField()
    judge_label = serializers.CharField(
        read_only=True,
        help_text="The judge as the pages name it: the curated judge record's name "
        "(e.g. smollm), else the same as judge (offline, openai:MODEL, replay:DIR).",
    )
    progress_percent = serializers.FloatField(read_only=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    is_active = serializers.SerializerMethodField()
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")
    page = serializers.SerializerMethodField()

    class Meta:
        model = EvaluationRun
        fields = [
            "id",
            "url",
            "page",
            "benchmark",
            "status",
            "is_active",
            "target",
            "target_id",
            "judge",
            "judge_label",
            "progress_done",
            "progress_total",
            "progress_percent",
            "failed_items",
            "is_complete",
            "attempts",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "duration_s",
        ]
        read_only_fields = fields

    def get_target_id(self, run: EvaluationRun) -> int | None:
        return run.scanner_id or run.probe_submission_id or run.checklist_submission_id

    def get_is_active(self, run: EvaluationRun) -> bool:
        return run.status in ACTIVE_STATUSES

    @extend_schema_field(OpenApiTypes.URI)
    def get_page(self, run: EvaluationRun) -> str | None:
        return _maybe_url(self.context.get("request"), "runs:detail", pk=run.pk)


class FailureCauseSerializer(serializers.Serializer):
    """One reason why items of a run could not be judged (``scoring.judges.failures``)."""

    kind = serializers.ChoiceField(
        choices=sorted(failures.ADVICE),
        help_text="transient, context, truncated, invalid, rejected or other.",
    )
    message = serializers.CharField(help_text="The failure, without request ids and timings.")
    count = serializers.IntegerField(help_text="Failed items with this cause.")
    resumable = serializers.BooleanField(
        help_text="Resuming the run can judge these items; otherwise change what the advice "
        "names first."
    )
    advice = serializers.CharField(help_text="What to do about it.")


class RunDetailSerializer(RunSerializer):
    repos = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        many=True, read_only=True, slug_field="project_id"
    )
    failure_causes = serializers.SerializerMethodField(
        help_text="Why the failed items could not be judged, most frequent cause first; empty "
        "unless the run ended with failed items."
    )
    metrics = serializers.SerializerMethodField(
        help_text="The run's headline metrics, null while it is queued or running or when it "
        "ended without results. Audit: precision, recall, f1 and their *_with_partial forms "
        "over the run's repos (null ratios when a repo has unjudged truth findings), with the "
        "counts; probes: resilience_index, pass_rate, severity_weighted_pass_rate, "
        "high_stakes_failure_rate; checklist: c_g, c_a, c_t, r, s. Always is_complete."
    )
    items = serializers.SerializerMethodField(help_text="The run's per-item results, paged.")
    waiting = serializers.SerializerMethodField(
        help_text="Why the run waits, null unless it does: kind (judge: its judge does not "
        "answer; storage: a write was refused for want of space; worker: no worker has picked "
        "it up, or its worker stopped), text (one line, as the run's page and the commands' "
        "--wait say it: 'Judge smollm unreachable since 17:42:05, next try at 17:42:35 ...'), "
        "since and next_try_at (ISO 8601, null where unknown or while a try is under way)."
    )
    checklist_votes = serializers.SerializerMethodField(
        help_text="Checklist runs: how answers were voted on (policy, CHECKLIST_VOTES: adaptive, "
        "two or single) and what it cost: answers, votes, asked_again (answers given more than "
        "one vote), two_would_ask (2 x answers); null for other runs."
    )
    judge_usage = serializers.SerializerMethodField(
        help_text="The run's judge calls: calls_new (requests sent), calls_cached, tokens_in, "
        "tokens_out, tokens_reasoning (of tokens_out), tokens_cached (of tokens_in, read from "
        "the server's prompt cache) and cached_share (tokens_cached / tokens_in, null for "
        "none), latency_p50_ms and latency_p95_ms over the requests sent, and cost_estimate in "
        "dollars (null unless JUDGE_PRICE_IN_PER_MTOK or JUDGE_PRICE_OUT_PER_MTOK is set; "
        "cached input at JUDGE_PRICE_CACHED_IN_PER_MTOK, by default half the input price)."
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "repos",
            "judge_config",
            "judge_usage",
            "checklist_votes",
            "failure_causes",
            "waiting",
            "metrics",
            "items",
        ]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                "kind": {"type": "string", "enum": ["judge", "storage", "worker"]},
                "text": {"type": "string"},
                "since": {"type": "string", "format": "date-time", "nullable": True},
                "next_try_at": {"type": "string", "format": "date-time", "nullable": True},
            },
        }
    )
    def get_waiting(self, run: EvaluationRun) -> dict[str, Any] | None:
        reason = run_waiting_reason(run)
        return reason.as_dict() if reason is not None else None

    @extend_schema_field(FailureCauseSerializer(many=True))
    def get_failure_causes(self, run: EvaluationRun) -> list[dict[str, object]]:
        return [c.as_dict() for c in ended_run_failure_causes(run=run)]

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_judge_usage(self, run: EvaluationRun) -> dict[str, Any]:
        return run_judge_usage(run=run).as_dict()

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_checklist_votes(self, run: EvaluationRun) -> dict[str, Any] | None:
        return checklist_run_votes(run=run)

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_metrics(self, run: EvaluationRun) -> dict[str, Any] | None:
        return run_metrics(run=run)

    @extend_schema_field(OpenApiTypes.URI)
    def get_items(self, run: EvaluationRun) -> str:
        return str(
            api_reverse("api:run-items", kwargs={"pk": run.pk}, request=self.context.get("request"))
        )


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 date-time, turned into UTC before it reaches the database.

    PostgreSQL refuses offsets beyond ±15:59 (``+16:04`` is valid ISO 8601), which would be a
    500; a time that cannot be expressed in UTC at all is a 400 naming the value.
    """

    def to_python(self, value: Any) -> Any:
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValidationError(f"{value!r} cannot be expressed in UTC.") from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class RunFilter(django_filters.FilterSet):
    benchmark = django_filters.ChoiceFilter(choices=Benchmark.choices)
    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices)
    active = StrictBooleanFilter(method="filter_active", label="Queued or running")
    mine = StrictBooleanFilter(method="filter_mine", label="Started by me")
    is_complete = StrictBooleanFilter(field_name="is_complete")
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")
    # Plain ids, not model choices: a choice filter answers 400 for an id that does not exist
    # and 200 for another team's, which lets anyone count submissions. Both now give 200 and
    # only the runs the user may see (``visible_runs``).
    probe_submission = django_filters.NumberFilter(
        field_name="probe_submission_id", min_value=1, max_value=MAX_ID, decimal_places=0
    )
    checklist_submission = django_filters.NumberFilter(
        field_name="checklist_submission_id", min_value=1, max_value=MAX_ID, decimal_places=0
    )

    class Meta:
        model = EvaluationRun
        fields = [
            "benchmark",
            "status",
            "is_complete",
            "scanner",
            "probe_submission",
            "checklist_submission",
        ]

    def filter_active(self, qs: QuerySet[EvaluationRun], name: str, value: bool | None) -> Any:
        if value is None:
            return qs
        active = list(ACTIVE_STATUSES)
        return qs.filter(status__in=active) if value else qs.exclude(status__in=active)

    def filter_mine(self, qs: QuerySet[EvaluationRun], name: str, value: bool | None) -> Any:
        if not value:
            return qs
        user = getattr(self.request, "user", None)
        if user is None or not user.is_authenticated:
            return qs.none()
        return qs.filter(created_by=user)


RUN_ORDERING = ["created_at", "started_at", "finished_at", "status", "benchmark", "progress_done"]


class RunListView(generics.ListAPIView):
    """Evaluation runs you may see: status, progress and timing."""

    serializer_class = RunSerializer
    filterset_class = RunFilter
    ordering_fields = RUN_ORDERING
    ordering = ["-created_at", "-id"]
    # A deep page of 300,000 runs steps over index entries, not rows and their joins.
    pagination_class = KeysFirstPagination

    def get_queryset(self) -> QuerySet[EvaluationRun]:
        return visible_runs(self.request.user)


class RunDetailView(generics.RetrieveAPIView):
    """One run; poll it while ``is_active`` to follow its progress. Once it has ended,
    ``metrics`` holds its headline figures and ``items`` links to its per-item results."""

    serializer_class = RunDetailSerializer

    def get_queryset(self) -> QuerySet[EvaluationRun]:
        return visible_runs(self.request.user).prefetch_related("repos")


# --- Own submissions ---------------------------------------------------------------------


class OwnSubmissionSerializer(serializers.Serializer):
    benchmark = serializers.ChoiceField(choices=Benchmark.choices)
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    status = serializers.CharField(
        help_text="The submission's own status (checklist), else its latest run's."
    )
    created_at = serializers.DateTimeField()
    run_id = serializers.IntegerField(allow_null=True)
    run_status = serializers.CharField(allow_null=True)
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)
    run = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.URI)
    def get_run(self, obj: OwnSubmission) -> str | None:
        if obj.run_id is None:
            return None
        request = self.context.get("request")
        return api_reverse("api:run-detail", kwargs={"pk": obj.run_id}, request=request)


class OwnSubmissionListView(generics.ListAPIView):
    """Everything you submitted, in all three benchmarks, newest first, with its status."""

    serializer_class = OwnSubmissionSerializer
    permission_classes = [IsAuthenticated]
    filter_backends: list[Any] = []

    @extend_schema(
        parameters=[
            OpenApiParameter("benchmark", str, enum=[b.value for b in Benchmark]),
            OpenApiParameter("status", str, description="e.g. queued, running, scored, failed"),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> list[OwnSubmission]:  # type: ignore[override]
        benchmark = self.request.query_params.get("benchmark") or None
        if benchmark is not None and benchmark not in Benchmark.values:
            raise serializers.ValidationError(
                {"benchmark": [f"Unknown benchmark {benchmark!r}; one of {Benchmark.values}."]}
            )
        return own_submissions(
            self.request.user,
            benchmark=benchmark,
            status=self.request.query_params.get("status") or None,
        )
