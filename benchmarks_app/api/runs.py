"""Per-run actions and reads beyond the run itself: its items, paged, cancelling and resuming it.

``/api/runs/`` and ``/api/runs/<id>/`` live in :mod:`benchmarks_app.api.shared`.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.schema import ErrorSerializer
from benchmarks_app.api.shared import RunDetailSerializer
from benchmarks_app.models import EvaluationRun, RunStatus
from benchmarks_app.selectors.run_bundles import RunBundleError, run_bundle_name
from benchmarks_app.selectors.run_items import LazyRows, run_items
from benchmarks_app.selectors.visibility import is_staff, visible_runs
from benchmarks_app.services.run_bundles import run_bundle_fetch
from benchmarks_app.services.runs import CANCELLABLE, RunNotResumable, run_cancel, run_resume


class RunItemSerializer(serializers.Serializer):
    """One item's result; which fields are set depends on the run's benchmark."""

    # audit: one truth finding (title, description and explanation are null where the repo's
    # truth is hidden from you)
    repo = serializers.CharField(required=False, help_text="Audit: the repo's project id.")
    finding_id = serializers.CharField(required=False, help_text="Audit: the truth finding.")
    title = serializers.CharField(required=False, allow_null=True)
    description = serializers.CharField(required=False, allow_null=True)
    outcome = serializers.CharField(required=False, help_text="match, partial, none, ...")
    scan_index = serializers.IntegerField(
        required=False, allow_null=True, help_text="Audit: the matched scan finding's index."
    )
    explanation = serializers.CharField(required=False, allow_null=True)
    votes = serializers.IntegerField(required=False)
    # probes: one case
    probe_id = serializers.CharField(required=False)
    category = serializers.CharField(required=False)
    severity = serializers.CharField(required=False)
    passed = serializers.BooleanField(required=False)
    risk_score = serializers.FloatField(required=False)
    weighted_risk = serializers.FloatField(required=False)
    refusal_signal = serializers.BooleanField(required=False)
    # checklist: one answer
    question = serializers.IntegerField(required=False)
    paper = serializers.CharField(required=False)
    answer = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    correct = serializers.BooleanField(required=False, allow_null=True)
    feedback = serializers.CharField(required=False, allow_blank=True)
    failure = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Why the item could not be judged (null unless it failed).",
    )

    def to_representation(self, instance: Any) -> Any:
        return instance  # the selector's row, as it is


class RunItemsView(generics.ListAPIView):
    """A run's per-item results, paged: truth findings (audit), cases (probes) or assessed
    answers (checklist). Hidden truth stays hidden; checklist items only to their team."""

    serializer_class = RunItemSerializer
    filter_backends: list[Any] = []

    def get_queryset(self) -> LazyRows:  # type: ignore[override]
        run = generics.get_object_or_404(visible_runs(self.request.user), pk=self.kwargs["pk"])
        return run_items(user=self.request.user, run=run)


class Conflict(exceptions.APIException):
    status_code = 409
    default_code = "conflict"
    default_detail = "The object is not in a state that allows this."


class RunCancelView(APIView):
    """Cancel a run that has not ended (queued, waiting or running): its creator or staff.

    A running run stops between judge calls; what was judged is kept.
    """

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None,
        responses={
            200: RunDetailSerializer,
            409: OpenApiResponse(ErrorSerializer, description="The run has ended: too late."),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        run = generics.get_object_or_404(visible_runs(request.user), pk=pk)
        if not is_staff(request.user) and run.created_by_id != request.user.pk:
            raise exceptions.PermissionDenied("Only the run's creator or staff may cancel it.")
        if run.status not in CANCELLABLE:
            raise Conflict(_not_cancellable(run))
        run = run_cancel(run=run)
        if run.status != RunStatus.CANCELLED:  # it ended meanwhile
            raise Conflict(_not_cancellable(run))
        return Response(RunDetailSerializer(run, context={"request": request}).data)


class RunResumeView(APIView):
    """Queue a failed, cancelled or paused run again: its creator or staff. What was judged is
    kept; only what is missing is judged. 409 when the run is not in such a state, or when its
    failed items would fail the same way again (the detail says what to change first)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None,
        responses={
            200: RunDetailSerializer,
            409: OpenApiResponse(
                ErrorSerializer, description="Not resumable; the detail says why."
            ),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        run = generics.get_object_or_404(visible_runs(request.user), pk=pk)
        if not is_staff(request.user) and run.created_by_id != request.user.pk:
            raise exceptions.PermissionDenied("Only the run's creator or staff may resume it.")
        try:
            run = run_resume(run=run)
        except RunNotResumable as exc:
            raise Conflict(str(exc)) from None
        return Response(RunDetailSerializer(run, context={"request": request}).data)


def _not_cancellable(run: EvaluationRun) -> str:
    return f"Run #{run.pk} is {run.status}; only a run that has not ended can be cancelled."


class RunBundleView(APIView):
    """The run's bundle (a zip with a versioned manifest and each member's sha256): inputs,
    judge record (name, model, server's scheme and host), every judge call with its prompt and
    raw answer, votes, verdicts and metrics; the truth's text only where it is public, and the
    participant's inputs as the run's phase publishes them (all of them for the run's owner
    and staff). Visible to whoever may see the run; built once per variant after the run
    ends, then served from storage. ``manage.py verify_run FILE`` re-scores it offline."""

    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY),
            409: OpenApiResponse(ErrorSerializer, description="The run is still being judged."),
        },
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        run = generics.get_object_or_404(visible_runs(request.user), pk=pk)
        try:
            data = run_bundle_fetch(run=run, viewer=request.user)
        except RunBundleError as exc:
            raise Conflict(str(exc)) from None
        response = HttpResponse(data, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{run_bundle_name(run)}"'
        return response
