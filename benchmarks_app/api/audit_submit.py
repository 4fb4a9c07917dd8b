"""Audit result uploads through the API: one repo, or a whole dataset in one submission.

Both call the services the web forms call, so the checks and messages are the same; a refused
upload stores nothing (400 naming the field, 403 for someone else's scanner name, 429 past the
daily limit with ``Retry-After``). An upload of exactly the findings a live run already judges
answers 200 with ``"status": "unchanged"`` and that run: nothing stored, no quota used.

Both take, as query parameters, form fields or top-level keys of a JSON body:
``confirm_untitled`` (keep findings that have neither title nor description) and the entry's
method: ``method_name``, ``method_description``, ``method_url``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.http import QueryDict
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import (
    ErrorDetail,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.exceptions import QuotaThrottled
from benchmarks_app.api.parsers import JSONParser
from benchmarks_app.models import Benchmark, EvaluationRun, Scanner
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.visibility import visible_repos, visible_runs
from benchmarks_app.services.audit import (
    AuditQuotaExceeded,
    AuditRunError,
    AuditUnchanged,
    audit_dataset_submit,
    audit_dataset_upload,
    audit_run_choose,
    audit_scan_submit,
    audit_scan_upload,
    audit_scanner_describe,
    parse_declared_empty,
)
from benchmarks_app.upload_reads import reads_upload

_TRUE = ("1", "true", "yes", "on")
T = TypeVar("T")


def _submitted(call: Callable[[], T]) -> T:
    """Run a submission service, turning its errors into the API's answers."""
    try:
        return call()
    except PermissionError as exc:
        field, _, message = str(exc).partition(": ")
        raise PermissionDenied({field: message} if message else str(exc)) from None
    except AuditQuotaExceeded as exc:
        wait = (exc.quota.resets_at - timezone.now()).total_seconds()
        throttled = QuotaThrottled(wait=max(wait, 1))  # 429 with Retry-After
        field, _, message = str(exc).partition(": ")
        throttled.detail = {field: [ErrorDetail(message or str(exc), code="throttled")]}
        raise throttled from None
    except AuditRunError as exc:
        field, _, message = str(exc).partition(": ")
        raise ValidationError({field if message else "detail": message or str(exc)}) from None


def _flag(value: Any, field: str) -> bool:
    if value is None or value == "" or value is False:
        return False
    if value is True or (isinstance(value, str) and value.strip().lower() in _TRUE):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValidationError({field: "must be true or false"})


METHOD_KEYS = ("method_name", "method_description", "method_url")
OPTION_KEYS = ("scanner", "judge", "declared_empty", "confirm_untitled", *METHOD_KEYS)


def _options(request: Request, data: Any) -> dict[str, Any]:
    """``confirm_untitled`` and the method fields, from the query, the form or the body."""
    query = request.query_params
    body = data if isinstance(data, QueryDict | dict) else {}
    confirm = query.get("confirm_untitled")
    if confirm is None:
        confirm = body.get("confirm_untitled")
    out: dict[str, Any] = {"confirm_untitled": _flag(confirm, "confirm_untitled")}
    for key in METHOD_KEYS:
        value = query.get(key)
        out[key] = value if value is not None else (body.get(key) or "")
    return out


PARAMETERS = [
    OpenApiParameter(
        "confirm_untitled",
        bool,
        description="keep findings that have neither title nor description (else refused)",
    ),
    OpenApiParameter("method_name", str, description="the entry's method (at most 100 chars)"),
    OpenApiParameter("method_description", str, description="a short description (500 chars)"),
    OpenApiParameter("method_url", str, description="an http(s) link about the method"),
]


def _unchanged(request: Request, exc: AuditUnchanged) -> Response:
    run = exc.run
    name = run.scanner.name if run.scanner else ""
    return Response(
        {
            "status": "unchanged",
            "detail": str(exc).removeprefix("unchanged: "),
            "run": run.pk,
            "run_status": run.status,
            "scanner": name,
            "release": str(run.release) if run.release_id else None,
            **_urls(request, run, name),
        },
        status=status.HTTP_200_OK,
    )


def _urls(request: Request, run: EvaluationRun, scanner: str) -> dict[str, str]:
    return {
        "run_url": request.build_absolute_uri(reverse("audit:run", args=[run.pk])),
        "report_url": request.build_absolute_uri(
            reverse("api:audit-report", args=[scanner]) + f"?run={run.pk}"
        ),
    }


def _accepted(
    request: Request,
    submit: Callable[[], EvaluationRun],
    *,
    scanner: str,
    details: Callable[[EvaluationRun, str], dict[str, Any]],
) -> Response:
    """Run a submission (``submit``, a service call) and answer 202 with the queued run: its
    id, status and scanner, then what the endpoint says of it (``details(run, scanner name)``)
    and its links; an unchanged upload answers as :func:`_unchanged` does."""
    try:
        run = _submitted(submit)
    except AuditUnchanged as exc:
        return _unchanged(request, exc)
    run.refresh_from_db()
    name = run.scanner.name if run.scanner else scanner
    return Response(
        {
            "run": run.pk,
            "status": run.status,
            "scanner": name,
            **details(run, name),
            **_urls(request, run, name),
        },
        status=status.HTTP_202_ACCEPTED,
    )


class SubmitResultsView(APIView):
    """Upload a scanner's results for one repo and queue their evaluation.

    Either a JSON body holding the results in any accepted shape (a list of findings, or
    ``{project, findings: [...], token_usage, ...}``), or a multipart form with the results
    as a JSON ``file`` (what the web form sends). The scanner's name comes from
    ``?scanner=NAME``, a ``scanner`` form field, or a top-level ``"scanner"`` key; the judge
    (``offline`` or ``openai``) from ``?judge=`` or a ``judge`` form field. Results without
    any finding are refused unless ``declared_empty=true`` says the tool found nothing in
    the repo. Answers 202 with the queued run; 200 ``unchanged`` when a live run already
    judges exactly these findings; 403 when the scanner name belongs to somebody else.
    """

    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(
        parameters=[
            OpenApiParameter("scanner", str, description="scanner name"),
            OpenApiParameter("judge", str, description="offline or openai (default: the site's)"),
            OpenApiParameter(
                "declared_empty", bool, description="the tool found nothing in this repo"
            ),
            OpenApiParameter(
                "dataset",
                str,
                description="the dataset whose release to judge against, "
                "where the repo is in several",
            ),
            *PARAMETERS,
        ],
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
    )
    @reads_upload
    def post(self, request: Request, project_id: str) -> Response:
        repo = visible_repos(request.user).filter(project_id=project_id).first()
        if repo is None:
            # Named, as a form names the field at fault; a private repo reads the same.
            raise NotFound(
                {"project_id": f"no repo {project_id!r}; GET /api/audit/repos/ lists them"}
            )
        data: Any = request.data
        dataset = None
        if slug := request.query_params.get("dataset"):
            dataset = AuditDataset.objects.filter(slug=slug).first()
            if dataset is None:
                raise ValidationError({"dataset": f"no dataset {slug!r}"})
        scanner = request.query_params.get("scanner", "")
        judge = request.query_params.get("judge") or None
        empty: Any = request.query_params.get("declared_empty")
        upload = None
        if isinstance(data, QueryDict):  # multipart or urlencoded form
            scanner = scanner or data.get("scanner", "")
            judge = judge or data.get("judge") or None
            empty = empty if empty is not None else data.get("declared_empty")
            upload = request.FILES.get("file")
            if upload is None:
                raise ValidationError(
                    {"file": "upload the results as a JSON file, or send them as a JSON body"}
                )
        options = _options(request, data)
        if isinstance(data, dict) and any(k in data for k in OPTION_KEYS if k != "judge"):
            scanner = scanner or str(data.get("scanner") or "")
            empty = empty if empty is not None else data.get("declared_empty")
            data = {k: v for k, v in data.items() if k not in OPTION_KEYS or k == "judge"}
        if not scanner:
            raise ValidationError({"scanner": "give the scanner's name (?scanner=NAME)"})
        declared = _flag(empty, "declared_empty")
        given: dict[str, Any] = {
            "user": request.user,
            "scanner_name": scanner,
            "repo": repo,
            "judge": judge,
            "declared_empty": declared,
            "dataset": dataset,
            **options,
        }

        def submit() -> EvaluationRun:
            if upload is not None:
                return audit_scan_upload(upload=upload, **given)
            return audit_scan_submit(data=data, **given)

        return _accepted(
            request,
            submit,
            scanner=scanner,
            details=lambda run, name: {
                "repo": repo.project_id,
                "release": str(run.release) if run.release_id else None,
                "findings": repo.scan_results.get(
                    scanner__name=name, is_current=True
                ).findings.count(),
            },
        )


class DatasetSubmitView(APIView):
    """Upload a scanner's results for every repo of a dataset: one run, one submission.

    Either a multipart form with ``file``: a .zip of ``<project_id>_results.json`` files or a
    JSON file holding ``{project_id: findings, ...}``; or that JSON object as the body. The
    scanner's name comes from ``?scanner=``, a ``scanner`` field or a top-level ``"scanner"``
    key; the judge likewise. Every repo of the dataset's official release needs findings: a
    repo missing from the upload, or with none, is refused by name unless it is listed in
    ``declared_empty`` (project ids, comma-separated, or a JSON list) because the tool found
    nothing there. Answers 202 with the queued run.
    """

    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(
        parameters=[
            OpenApiParameter("scanner", str, description="scanner name"),
            OpenApiParameter("judge", str, description="offline or openai (default: the site's)"),
            OpenApiParameter(
                "declared_empty",
                str,
                description="project ids (comma-separated) where the tool found nothing",
            ),
            *PARAMETERS,
        ],
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
    )
    @reads_upload
    def post(self, request: Request, slug: str) -> Response:
        dataset = AuditDataset.objects.filter(slug=slug).first()
        if dataset is None:
            raise NotFound({"dataset": f"no dataset {slug!r}; GET /api/audit/datasets/ lists them"})
        data: Any = request.data
        query = request.query_params
        scanner = query.get("scanner", "")
        judge = query.get("judge") or None
        empty: list[Any] = query.getlist("declared_empty")
        upload = None
        if isinstance(data, QueryDict):
            scanner = scanner or data.get("scanner", "")
            judge = judge or data.get("judge") or None
            empty = empty or data.getlist("declared_empty")
            upload = request.FILES.get("file")
            if upload is None:
                raise ValidationError(
                    {
                        "file": "upload a .zip of <project_id>_results.json files or a JSON "
                        "file {project_id: findings}, or send that object as a JSON body"
                    }
                )
        elif isinstance(data, dict):
            scanner = scanner or str(data.get("scanner") or "")
            judge = judge or (str(data["judge"]) if data.get("judge") else None)
            body_empty = data.get("declared_empty")
            if not empty and body_empty:
                empty = body_empty if isinstance(body_empty, list) else [body_empty]
        else:
            raise ValidationError({"results": "expected a JSON object {project_id: findings}"})
        if not scanner:
            raise ValidationError({"scanner": "give the scanner's name (?scanner=NAME)"})
        declared = _submitted(lambda: parse_declared_empty(empty))
        options = _options(request, data)
        given: dict[str, Any] = {
            "user": request.user,
            "scanner_name": scanner,
            "dataset": dataset,
            "declared_empty": declared,
            "judge": judge,
            **options,
        }
        results = {k: v for k, v in data.items() if k not in OPTION_KEYS} if upload is None else {}
        if upload is None and not results:
            raise ValidationError({"results": "no repo in the body; send {project_id: findings}"})

        def submit() -> EvaluationRun:
            if upload is not None:
                return audit_dataset_upload(upload=upload, **given)
            return audit_dataset_submit(results=results, **given)

        return _accepted(
            request,
            submit,
            scanner=scanner,
            details=lambda run, name: {
                "dataset": dataset.slug,
                "release": str(run.release) if run.release_id else None,
                "repos": sorted(run.repos.values_list("project_id", flat=True)),
                "declared_empty": sorted(declared),
            },
        )


# --- Entry choice and scanner descriptions (owners' writes) ---------------------------------


class ChooseSerializer(serializers.Serializer):
    chosen = serializers.BooleanField(
        default=True,
        help_text="true: this run stands for its scanner on its board; false: the latest does.",
    )


class RunChooseView(APIView):
    """Choose which complete run of your scanner stands for it on its release's (phase's) board.

    Only the scanner's owner may; one run is chosen per scanner, release and phase (choosing
    one unchooses the others). ``{"chosen": false}`` goes back to the latest results.
    """

    permission_classes = [IsAuthenticated]

    @extend_schema(request=ChooseSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(visible_runs(request.user).filter(benchmark=Benchmark.AUDIT), pk=pk)
        body = ChooseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        chosen = body.validated_data["chosen"]
        run = _submitted(lambda: audit_run_choose(user=request.user, run=run, chosen=chosen))
        return Response(
            {
                "run": run.pk,
                "chosen": run.board_choice,
                "scanner": run.scanner.name if run.scanner else None,
                "release": str(run.release) if run.release_id else None,
                "phase": run.phase.slug if run.phase is not None else None,
            }
        )


class ScannerDescriptionSerializer(serializers.Serializer):
    description = serializers.CharField(
        allow_blank=True, max_length=2000, trim_whitespace=False, help_text="At most 2000 chars."
    )


def scanner_describe(request: Request, scanner: Scanner) -> None:
    """Set ``scanner``'s description from the request body (its owner or staff only)."""
    if not request.user.is_authenticated:
        raise NotAuthenticated()
    body = ScannerDescriptionSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    description = body.validated_data["description"]
    _submitted(
        lambda: audit_scanner_describe(user=request.user, scanner=scanner, description=description)
    )
