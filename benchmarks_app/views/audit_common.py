"""What the audit pages share, below them all: a board's query string and its chips (links to
the release's other judges, the dataset's other releases, the other datasets), the judges a
user may choose on the submission forms, and how both forms answer an upload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from benchmarks_app.models import EvaluationRun
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit_boards import Board
from benchmarks_app.selectors.judge_records import judge_record_choices
from benchmarks_app.services.audit import (
    AuditRunError,
    AuditUnchanged,
    participant_openai_allowed,
)


def board_query(board: Board, **override: Any) -> str:
    params = {
        "dataset": board.dataset.slug,
        "release": board.release.number,
        "judge": board.judge,
        **({"phase": board.phase.slug} if board.phase is not None else {}),
        **override,
    }
    return urlencode(params)


def board_chips(board: Board) -> list[tuple[str, str, bool]]:
    """Links to the release's other judges' boards, the dataset's other releases and the
    other datasets: (label, url, active)."""
    url = reverse("audit:leaderboard")
    chips = []
    for judge in board.judges or [board.judge]:
        label = f"judge {judge}" + (" (official)" if judge == board.judges[0] else "")
        chips.append((label, f"{url}?{board_query(board, judge=judge)}", judge == board.judge))
    for release in board.dataset.releases.filter(is_published=True).order_by("number"):
        if release.pk != board.release.pk:
            chips.append(
                (
                    str(release),
                    f"{url}?dataset={board.dataset.slug}&release={release.number}",
                    False,
                )
            )
    for other in AuditDataset.objects.filter(releases__is_published=True).distinct():
        if other.pk != board.dataset.pk:
            chips.append((f"dataset {other.slug}", f"{url}?dataset={other.slug}", False))
    return chips


def judge_choices(user: Any) -> list[tuple[str, str]]:
    """Offline always; OpenAI only where the site is configured to pay for (or serve) it and
    this user may spend it, by the same rules the service applies; for staff, every curated
    judge record too."""
    choices = [("offline", "Offline (TF-IDF similarity, free and deterministic)")]
    configured = getattr(settings, "OPENAI_API_KEY", "") or getattr(
        settings, "OPENAI_BASE_URL", None
    )
    if configured and participant_openai_allowed(user):
        model = getattr(settings, "JUDGE_MODEL", "o4-mini")
        choices.append(("openai", f"OpenAI ({model}, majority of votes)"))
    if getattr(user, "is_staff", False):
        # Staff may judge with any curated record (a local server, another model).
        choices += judge_record_choices(kinds=("offline", "openai"))
    return choices


def upload_answer(
    request: HttpRequest,
    form: forms.Form,
    upload: Callable[[], EvaluationRun],
    received: Callable[[EvaluationRun], str],
) -> HttpResponse | None:
    """Make a form's upload and answer it as both audit forms do: an identical re-upload goes
    to the run it matches, a refusal lands on the field it names (else on the form), success
    goes to the new run's page saying what was ``received``. None: the form shows its errors.
    """
    try:
        run = upload()
    except AuditUnchanged as exc:
        messages.info(request, f"Unchanged: {str(exc).removeprefix('unchanged: ')}.")
        return redirect("audit:run", pk=exc.run.pk)
    except (AuditRunError, PermissionError) as exc:
        field, _, message = str(exc).partition(": ")
        if message and field in form.fields:
            form.add_error(field, message)
        else:
            form.add_error(None, str(exc))
        return None
    messages.success(request, received(run))
    return redirect("audit:run", pk=run.pk)
