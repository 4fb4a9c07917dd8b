"""Safety-probe API: leaderboard, report per submission, and response submissions.

``POST submissions/`` (authenticated) takes either a multipart upload (``file`` plus
``suite``, ``model`` and optional ``format``: ``jsonl`` or ``xstest``) or a JSON body
``{"suite", "model", "responses": [{"probe_id", "output", "human_label"?}]}``. It stores the
responses, queues their scoring and answers 201 with the submission and run ids; every
problem (unknown ids, duplicates, empty outputs, missing probes) comes back as a 400.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.leaderboard import (
    BoardRowListView,
    ordering_parameter,
    paired_mark_fields,
)
from benchmarks_app.api.parsers import JSONParser
from benchmarks_app.api.upload_fields import UploadFileField
from benchmarks_app.formatting import MAX_ID
from benchmarks_app.models.phases import Phase
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks
from benchmarks_app.selectors.probe_boards import (
    PROBE_ORDERING_COLUMNS,
    ProbeReportNotFound,
    board_placed,
    board_row,
    probe_board_order,
    probe_board_page_values,
    probe_board_rows,
    probe_phase,
    probe_suite_check,
)
from benchmarks_app.selectors.probes import probe_report, probe_submission
from benchmarks_app.services.probes import (
    ProbeChoiceError,
    ProbeFormatError,
    ProbeOwnershipError,
    ProbeSubmissionRefused,
    probe_responses_count_problem,
    probe_submission_choose,
    probe_submission_submit,
    probe_submission_upload,
)
from benchmarks_app.services.uploads import errors_capped, upload_too_large
from benchmarks_app.upload_reads import reads_upload
from scoring.probes.io import FORMATS
from scoring.probes.types import HUMAN_LABELS, ResponseSpec


class ProbeLeaderboardRowSerializer(serializers.Serializer):
    """One model on one suite: the metrics of its latest scored submission."""

    rank = serializers.IntegerField(
        allow_null=True,
        help_text="Position on its board (suite and suite version) by resilience index "
        "(missing last), then pass rate, then model name. Null (as are the rank range and "
        "tie) for a participant's own row on a hidden phase's board until it is revealed.",
    )
    rank_low = serializers.IntegerField(
        allow_null=True,
        help_text="Best rank the 95% intervals allow: 1 + the rows on the board whose "
        "interval lies wholly above this row's.",
    )
    rank_high = serializers.IntegerField(
        allow_null=True,
        help_text="Worst rank the 95% intervals allow: the rows on the board (this one "
        "included) whose interval's high is at or above this row's low.",
    )
    tied = serializers.BooleanField(
        help_text="Statistically tied: this row's interval overlaps the row above's."
    )
    id, board, paired_rank_low, paired_rank_high, paired_tied = paired_mark_fields()
    suite = serializers.CharField(help_text="Probe suite name.")
    suite_version = serializers.CharField(
        allow_blank=True,
        help_text="Content hash of the probes, rules, scoring settings and refusal signal the "
        "row was scored with; rows of different versions are never ranked together. Empty for "
        "reports scored before versions were recorded.",
    )
    model = serializers.CharField(help_text="Model name as submitted.")
    submission_id = serializers.IntegerField()
    run_id = serializers.IntegerField(help_text="The scoring run these metrics come from.")
    resilience_index = serializers.FloatField(
        allow_null=True, help_text="1 - mean severity-weighted risk, in [0, 1]."
    )
    resilience_index_ci = serializers.SerializerMethodField(
        help_text="95% percentile-bootstrap interval [low, high] of the resilience index, "
        "resampling the probes (2,000 seeded resamples, computed when the run finished); null "
        "for reports scored before intervals were stored."
    )
    pass_rate = serializers.FloatField(allow_null=True, help_text="Share of probes passed.")
    severity_weighted_pass_rate = serializers.FloatField(
        allow_null=True, help_text="Passed probes weighted by severity."
    )
    high_stakes_failure_rate = serializers.FloatField(
        allow_null=True, help_text="Share of failures on critical or high-severity probes."
    )
    agreement_accuracy = serializers.FloatField(
        allow_null=True,
        help_text="Agreement of the refusal signal with human labels; null without labels.",
    )
    agreement_kappa = serializers.FloatField(
        allow_null=True, help_text="Cohen's kappa of that agreement; null without labels."
    )
    evaluated = serializers.IntegerField(allow_null=True, help_text="Probes scored.")
    scored_at = serializers.DateTimeField()
    phase = serializers.CharField(
        allow_null=True, help_text="The phase (slug) of this board; null: all entries."
    )
    is_baseline = serializers.BooleanField(
        help_text="A reference model kept by the maintainers, ranked like any other."
    )
    method_name = serializers.CharField(allow_blank=True, help_text="As the entrant gave it.")
    method_description = serializers.CharField(allow_blank=True)
    method_url = serializers.CharField(allow_blank=True)
    report = serializers.SerializerMethodField(help_text="The submission's full JSON report.")

    @extend_schema_field(serializers.ListField(child=serializers.FloatField(), allow_null=True))
    def get_resilience_index_ci(self, row: dict[str, Any]) -> list[float] | None:
        if row["ci_low"] is None or row["ci_high"] is None:
            return None
        return [row["ci_low"], row["ci_high"]]

    @extend_schema_field(OpenApiTypes.URI)
    def get_report(self, row: dict[str, Any]) -> str:
        url = reverse("api:probes-report", args=[row["submission_id"]])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url


PROBE_ORDERING = list(PROBE_ORDERING_COLUMNS)


class ResponseItemSerializer(serializers.Serializer):
    probe_id = serializers.CharField()
    output = serializers.CharField(allow_blank=True, trim_whitespace=False)
    human_label = serializers.ChoiceField(choices=HUMAN_LABELS, required=False, allow_blank=True)


class SubmissionInputSerializer(serializers.Serializer):
    suite = serializers.CharField(max_length=100)
    model = serializers.CharField(max_length=200)
    format = serializers.ChoiceField(choices=FORMATS, required=False)
    file = UploadFileField(required=False)
    responses = ResponseItemSerializer(many=True, required=False)
    method_name = serializers.CharField(
        max_length=100, required=False, allow_blank=True, help_text="Shown on the board."
    )
    method_description = serializers.CharField(
        max_length=500, required=False, allow_blank=True, help_text="A short description."
    )
    method_url = serializers.URLField(
        max_length=500, required=False, allow_blank=True, help_text="A link (paper, code)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("file") and not attrs.get("responses"):
            raise ValidationError({"file": "Upload a file or give a non-empty 'responses' list."})
        upload = attrs.get("file")
        too_large = upload_too_large(upload.size, upload.name or "file") if upload else None
        if too_large:
            raise ValidationError({"file": too_large})
        return attrs


class ChosenSerializer(serializers.Serializer):
    submission_id = serializers.IntegerField()
    model = serializers.CharField()
    chosen = serializers.BooleanField()


class QuotaExceededError(APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "quota_exceeded"
    default_detail = "Submission quota exceeded."


class SubmissionCreatedSerializer(serializers.Serializer):
    submission_id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    status = serializers.CharField()
    report_url = serializers.CharField()
    page_url = serializers.CharField()


class ProbeLeaderboardView(BoardRowListView):
    """Each model's entry per suite version, ranked within its board.

    A board is one suite at one suite version (and phase, with `phase`); each row has its
    95% interval, rank range and tie mark. A model's entry is the submission it chose,
    else its latest. Paginated in the database (`page`, `page_size`): a page is the same
    few queries whatever the number of entrants. `suite` keeps one suite (an unknown name
    is a 400), `version` one suite version, `phase` one phase of that suite; `ordering`
    re-orders the rows, keeping their rank on their board.
    """

    serializer_class = ProbeLeaderboardRowSerializer
    ordering_columns = PROBE_ORDERING_COLUMNS

    @extend_schema(
        parameters=[
            OpenApiParameter("suite", str, description="Only this suite (exact name)."),
            OpenApiParameter(
                "version",
                str,
                description="Only this suite version (as in `suite_version`; empty: reports "
                "scored before versions were recorded).",
            ),
            OpenApiParameter(
                "phase",
                str,
                description="The board of this phase (its slug) of `suite`; without it, the "
                "board of all entries. A hidden phase's board shows staff every row and a "
                "participant their own rows until it is revealed.",
            ),
            ordering_parameter(
                list(PROBE_ORDERING_COLUMNS), "suite, newest version first, then rank"
            ),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_board_queryset(self) -> QuerySet[Any]:
        params = self.request.query_params
        suite = params.get("suite") or None
        suite_id: int | None = None
        phase: Phase | None = None
        try:
            if suite is not None:
                suite_id = probe_suite_check(suite)
            if params.get("phase"):
                if suite is None:
                    raise ProbeReportNotFound("phase: give the phase's suite too (?suite=NAME)")
                phase = probe_phase(suite_name=suite, slug=params["phase"])
        except ProbeReportNotFound as exc:
            field, _, message = str(exc).partition(": ")
            raise ValidationError({field: message}) from exc
        self._placed = board_placed(phase, self.request.user)
        rows, self._board_order, self._one_board = probe_board_order(
            probe_board_rows(
                suite_id=suite_id,
                version=params.get("version") if "version" in params else None,
                phase=phase,
                user=self.request.user,
            )
        )
        # Model rows, not values(): the page's keys are then read without the joins the
        # row's columns need (values() keeps them in every query made from it).
        return rows

    @property
    def default_ordering(self) -> list[Any]:
        return self._board_order

    def whole_board(self) -> bool:
        return self._one_board and self._placed

    shape = PROBE_SHAPE

    def row(self, obj: Any) -> dict[str, Any]:
        return board_row(obj, placed=self._placed)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset().only("pk"))
        assert page is not None  # a pagination class is always set
        ids = [obj.pk for obj in page]
        found = probe_board_page_values(ids)
        stored = attach_marks(
            PROBE_SHAPE,
            [found[pk] for pk in ids if pk in found],
            first_position=self.first_position(),
            board_size=self.board_size(),
        )
        rows = [self.row(values) for values in stored]
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)


class ProbeReportView(APIView):
    """The JSON report of a submission's latest scored run."""

    permission_classes = [AllowAny]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        if pk > MAX_ID:  # past any database's integer: no such submission (not a 500)
            raise NotFound("No such submission.")
        try:
            return Response(probe_report(submission_id=pk, user=request.user))
        except ProbeReportNotFound as exc:
            raise NotFound(str(exc)) from exc


class ProbeSubmissionCreateView(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(request=SubmissionInputSerializer, responses={201: SubmissionCreatedSerializer})
    @reads_upload
    def post(self, request: Request) -> Response:
        raw = request.data.get("responses") if isinstance(request.data, dict) else None
        if isinstance(raw, list):
            # Counted before the serializer validates (and copies) every item of the list.
            too_many = probe_responses_count_problem(
                suite_name=str(request.data.get("suite") or ""), count=len(raw)
            )
            if too_many:
                raise ValidationError({"responses": [too_many]})
        serializer = SubmissionInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        kwargs: dict[str, Any] = {}
        submit: Any = probe_submission_submit
        if data.get("file"):
            # The form's service: the file is read line by line as it is parsed.
            submit = probe_submission_upload
            kwargs.update(upload=data["file"], fmt=data.get("format") or None)
        else:
            kwargs["responses"] = [
                ResponseSpec(
                    probe_id=item["probe_id"],
                    output=item["output"],
                    human_label=item.get("human_label", ""),
                )
                for item in data["responses"]
            ]
            kwargs["source_name"] = "api"
        for name in ("method_name", "method_description", "method_url"):
            kwargs[name] = data.get(name, "")
        try:
            run = submit(
                suite_name=data["suite"], model_name=data["model"], owner=request.user, **kwargs
            )
        except ProbeOwnershipError as exc:
            raise PermissionDenied({exc.field: exc.message}) from None
        except ProbeSubmissionRefused as exc:
            if exc.code == "quota_exceeded":
                raise QuotaExceededError({exc.field: exc.message}) from None
            raise PermissionDenied({exc.field: exc.message}, code=exc.code) from None
        except ProbeFormatError as exc:
            field = "file" if data.get("file") else "responses"
            for prefix in ("suite", "method_name", "method_description", "method_url"):
                if any(e.startswith(f"field '{prefix}'") for e in exc.errors):
                    field = prefix
            raise ValidationError({field: errors_capped(exc.errors)}) from exc
        run.refresh_from_db()
        sid = run.probe_submission_id
        body = {
            "submission_id": sid,
            "run_id": run.pk,
            "status": run.status,
            "report_url": request.build_absolute_uri(reverse("api:probes-report", args=[sid])),
            "page_url": request.build_absolute_uri(reverse("probes:submission", args=[sid])),
        }
        return Response(body, status=status.HTTP_201_CREATED)


class ProbeChooseView(APIView):
    """Make a scored submission the entry that represents its model on the boards (one per
    model, suite and phase; the others are unchosen). Owner only."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={200: ChosenSerializer})
    def post(self, request: Request, pk: int) -> Response:
        if pk > MAX_ID:
            raise NotFound("No such submission.")
        try:
            submission = probe_submission(submission_id=pk, user=request.user)
        except ProbeReportNotFound as exc:
            raise NotFound(str(exc)) from exc
        try:
            probe_submission_choose(user=request.user, submission=submission)
        except ProbeChoiceError as exc:
            if exc.code == "not_scored":
                raise ValidationError({"submission": exc.message}) from None
            raise PermissionDenied(exc.message) from None
        return Response(
            {"submission_id": submission.pk, "model": submission.model_name, "chosen": True}
        )


urlpatterns = [
    path("leaderboard/", ProbeLeaderboardView.as_view(), name="probes-leaderboard"),
    path("submissions/", ProbeSubmissionCreateView.as_view(), name="probes-submit"),
    path("submissions/<int:pk>/report/", ProbeReportView.as_view(), name="probes-report"),
    path("submissions/<int:pk>/choose/", ProbeChooseView.as_view(), name="probes-choose"),
]
