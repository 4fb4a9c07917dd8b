"""``POST /api/checklist/extract/`` (``api:checklist-extract``): what extraction reads.

The web form lets a participant check the extracted answers before the assessment; this
gives API clients the same check before they submit. Nothing is stored and no quota is
spent, so a participant can fix a paper whose questions are not all found (the answer says
which, by number and title) without losing a submission. The JSON is that of
``manage.py extract_checklist --format json``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.upload_fields import UploadFileField
from benchmarks_app.services.checklist import ChecklistSubmissionError
from benchmarks_app.services.checklist.papers import checklist_extract_preview, read_upload

ANSWERS = ["Yes", "No", "NA", "TODO"]


class ExtractRequestSerializer(serializers.Serializer):
    file = UploadFileField(help_text="The paper: .pdf, .tex or .zip of LaTeX sources.")


class ExtractedAnswerSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    title = serializers.CharField()
    answer = serializers.ChoiceField(choices=ANSWERS)
    justification = serializers.CharField(allow_blank=True)


class QuestionFindingSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 to 15.")
    title = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["found", "missing", "unrecognized"],
        help_text="missing: the question is not in the checklist; unrecognized: its answer "
        "is not Yes, No, NA or TODO.",
    )
    found = serializers.BooleanField()
    answer = serializers.ChoiceField(choices=ANSWERS, allow_null=True)
    raw_answer = serializers.CharField(allow_blank=True, help_text="The answer as printed.")
    justification = serializers.CharField(allow_blank=True)
    page = serializers.IntegerField(
        allow_null=True, help_text="PDF page of the question (null for LaTeX sources)."
    )
    problem = serializers.CharField(allow_blank=True, help_text="Why it is missing, or a note.")


class MissingQuestionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    title = serializers.CharField()


class ExtractionSerializer(serializers.Serializer):
    answers = ExtractedAnswerSerializer(many=True, help_text="The answers that were read.")
    questions = QuestionFindingSerializer(many=True, help_text="One finding per question.")
    complete = serializers.BooleanField(
        help_text="All 15 questions read: a submission of this paper would be accepted."
    )
    found = serializers.IntegerField(help_text="Questions found (of 15).")
    missing = MissingQuestionSerializer(many=True)
    body_words = serializers.IntegerField(help_text="Words of the body the judge reads.")
    body_truncated = serializers.BooleanField(help_text="The body was cut at the word cap.")
    title = serializers.CharField(allow_blank=True)
    source_format = serializers.ChoiceField(choices=["pdf", "tex", "zip"])
    pages = serializers.IntegerField(allow_null=True)
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text='What cleaning did, e.g. "review-mode line numbers removed (465 lines)".',
    )


class ChecklistExtractView(APIView):
    """Extract a paper's checklist without submitting it: per question, the answer, the
    justification and the page, or why the question is missing. No quota, nothing stored.
    400 (naming ``file``) when the file cannot be read or holds no checklist section; 429
    past the user's previews an hour (CHECKLIST_PAPER_CHECKS_PER_HOUR), 503 while the site
    reads as many papers as it reads at once (PAPER_READERS_MAX), both with Retry-After."""

    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]
    reads_participant_files = True  # documents the 503 (api.schema)

    @extend_schema(
        operation_id="checklist_extract",
        request={"multipart/form-data": ExtractRequestSerializer},
        responses={200: ExtractionSerializer},
        examples=[
            OpenApiExample(
                "A paper with question 9 missing",
                response_only=True,
                value={
                    "complete": False,
                    "found": 14,
                    "missing": [{"number": 9, "title": "Code of Ethics"}],
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = ExtractRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            upload = read_upload(serializer.validated_data["file"], "file", what="paper")
            assert upload is not None
            paper = checklist_extract_preview(upload=upload, field="file", user=request.user)
        except ChecklistSubmissionError as exc:
            raise exceptions.ValidationError({exc.field or "file": [exc.message]}) from exc
        return Response(paper.as_json())
