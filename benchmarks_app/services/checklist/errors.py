"""Refusals of the checklist challenge's services, each naming the form field at fault.

Views and the API turn them into form errors or HTTP answers, so they carry a ``code`` and
the ``field`` instead of being mapped from their message.
"""

from __future__ import annotations

from benchmarks_app.selectors.checklist import QuotaStatus


class ChecklistSubmissionError(Exception):
    """A submission was refused; ``field`` names the form field (genuine, adversarial...)."""

    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class QuotaExceeded(ChecklistSubmissionError):
    code = "quota_exceeded"

    def __init__(self, message: str, *, quota: QuotaStatus) -> None:
        super().__init__(message)
        self.quota = quota


class NotAllowed(ChecklistSubmissionError):
    code = "not_allowed"


class TeamError(ChecklistSubmissionError):
    """A team could not be created or joined; ``field`` is ``name`` or ``invite_code``."""
