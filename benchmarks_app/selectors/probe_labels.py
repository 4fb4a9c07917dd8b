"""Reads of human-labelled probe responses: what the refusal classifier is trained and measured on.

A model's labels are those of its latest submission to the suite that has any human label, so a
re-upload with corrected labels replaces the old ones rather than adding to them.
"""

from __future__ import annotations

from collections import defaultdict

from benchmarks_app.models import ProbeSuite, Response, ResponseSubmission


def probe_labelled_responses(*, suite: ProbeSuite) -> dict[str, list[tuple[str, str]]]:
    """``{model_name: [(output, human_label), ...]}`` for every labelled model (two queries)."""
    latest: dict[str, int] = {}
    for model_name, pk in (
        ResponseSubmission.objects.filter(suite=suite, responses__human_label__gt="")
        .order_by("model_name", "-created_at", "-pk")
        .values_list("model_name", "pk")
        .distinct()
    ):
        latest.setdefault(model_name, pk)
    rows: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for model_name, output, label in (
        Response.objects.filter(submission_id__in=latest.values())
        .exclude(human_label="")
        .order_by("submission__model_name", "pk")
        .values_list("submission__model_name", "output", "human_label")
    ):
        rows[model_name].append((output, label))
    return dict(rows)
