"""Who may submit responses under a model name on a probe suite.

The leaderboard keeps one row per (suite, model name), so a model name is an identity: it is
normalized before it is stored (so that look-alike names cannot pass for another model) and
belongs to whoever first submitted it on the suite.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from benchmarks_app.models import ProbeSuite, ResponseSubmission
from scoring.names import is_invisible, name_skeleton
from scoring.probes.io import ProbeFormatError


class ProbeOwnershipError(ProbeFormatError, PermissionError):
    """The model name on this suite is not the submitter's to write; nothing was stored.

    A :class:`ProbeFormatError` whose one error starts with ``field 'model':`` (so callers
    that list a submission's problems by field show it on the model field), and a
    :class:`PermissionError` like the audit service's scanner check: ``field`` and
    ``message`` give the parts and ``str()`` is ``"model: <message>"``, so an API maps it
    to a 403 naming the field.
    """

    field = "model"

    def __init__(self, source: str, message: str) -> None:
        self.message = message
        super().__init__(source, [f"field 'model': {message}"])

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def model_name_normalize(*, model_name: str, source: str) -> str:
    """The model name as it is stored; a :class:`ProbeFormatError` naming ``source`` if unusable.

    NFKC-folded, trimmed and cut to the column's 200 characters, with every dash written "-".
    """
    model_name = unicodedata.normalize("NFKC", model_name).strip()[:200]
    # Every dash (non-breaking hyphen, en dash...) is stored as "-", as it reads.
    model_name = "".join("-" if unicodedata.category(ch) == "Pd" else ch for ch in model_name)
    if not model_name:
        raise ProbeFormatError(source, ["field 'model': a model name is required"])
    if any(is_invisible(ch) for ch in model_name):
        # Zero-width or control characters make a name that looks like another model's.
        raise ProbeFormatError(
            source, ["field 'model': the name contains invisible or control characters"]
        )
    return model_name


def model_name_refusal(*, suite: ProbeSuite, model_name: str, owner: Any) -> str | None:
    """Why ``owner`` may not submit under ``model_name`` on ``suite``; None when it may.

    The leaderboard keeps one row per (suite, model name), the latest scored submission, so
    writing under a name replaces that row. As with audit scanners, a name belongs to whoever
    first submitted it on the suite; a name whose first submission has no owner was imported
    by the maintainers (``submit_responses``, the demo). Only its owner and staff may submit
    under a name; ``owner=None`` is the maintainers' own path (management commands).
    """
    if owner is None:
        return None
    if not getattr(owner, "is_authenticated", False):
        return "sign in to submit responses"
    if getattr(owner, "is_staff", False):
        return None
    # Look-alikes are one name: "GPT-4", or "gpt-4" spelt with a Cyrillic p (U+0440), next
    # to the curators' "gpt-4" would pass for their row (see scoring.names).
    skeleton = name_skeleton(model_name)
    names = ResponseSubmission.objects.filter(suite=suite).values_list("model_name", flat=True)
    look_alikes = {n for n in names.distinct() if name_skeleton(n) == skeleton}
    first = (
        ResponseSubmission.objects.filter(suite=suite, model_name__in=look_alikes)
        .order_by("pk")
        .values("owner_id")
        .first()
    )
    if first is None or first["owner_id"] == owner.pk:
        return None
    whose = (
        "is maintained by the site's curators"
        if first["owner_id"] is None
        else "belongs to another user"
    )
    return (
        f"model {model_name!r} on suite {suite.name!r} {whose}; "
        "submit under a model name of your own"
    )
