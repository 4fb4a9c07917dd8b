"""Judges as records that maintainers curate: where a run's judge lives and how it is asked.

A run points at its :class:`JudgeRecord`, and the worker that takes the run builds the judge
from the record, not from its own environment: any worker runs it the same way. The API key
itself is never stored; the record names the environment variable that holds it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from benchmarks_app.models.common import TimeStampedModel

# Query parameters that carry a key (``?api-key=...``, ``?token=...``), compared lowercased
# with "-" read as "_".
CREDENTIAL_PARAMS = frozenset(
    {"key", "api_key", "apikey", "token", "access_token", "secret", "password", "sig", "auth"}
)


def url_credential(url: str) -> str:
    """What credential ``url`` carries ("a user name and password", "the query parameter
    'api-key'"), or "" when it carries none."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced "[": not a URL any server answers; nothing carried
        return ""
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "a user name or password"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower().replace("-", "_") in CREDENTIAL_PARAMS:
            return f"the query parameter {name!r}"
    return ""


# No ":" in a record's name, so that it never takes the board key of a legacy spelling
# (``openai:MODEL``, ``replay:DIR``).
JUDGE_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$"


# The records made from the site's settings; their names add nothing to a run's own judge
# spelling (``offline``, ``openai:MODEL``), so a run names its judge by a record's name only
# for the other, curated, records.
DEFAULT_JUDGE_RECORD_NAMES = ("offline", "openai")


class JudgeKind(models.TextChoices):
    OFFLINE = "offline", "Offline (rules, no model)"
    REPLAY = "replay", "Replay of recorded results"
    OPENAI = "openai", "OpenAI-compatible server"


class JudgeRecord(TimeStampedModel):
    """A judge runs can be made with: kind, server, model and the request options that matter.

    Blank options (empty base URL, no answer bound...) fall back to the site's settings
    (``OPENAI_BASE_URL``, ``JUDGE_MAX_ANSWER_TOKENS``...), so the default records made from
    today's settings keep behaving as before.
    """

    name = models.CharField(
        max_length=80,
        unique=True,
        validators=[
            RegexValidator(
                JUDGE_NAME_RE, "letters, digits, '.', '_' and '-' only (no ':'), at most 80"
            )
        ],
        help_text="What --judge NAME and the boards call it.",
    )
    kind = models.CharField(max_length=10, choices=JudgeKind.choices, default=JudgeKind.OPENAI)
    base_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="OpenAI-compatible base URL (…/v1); blank: the site's OPENAI_BASE_URL. "
        "For a replay judge: the folder of recorded results.",
    )
    model = models.CharField(max_length=200, blank=True, help_text="Blank: JUDGE_MODEL.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="OPENAI_API_KEY",
        validators=[RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name")],
        help_text="NAME of the environment variable (in the worker) that holds the API key; "
        "never the key. Unset there: OPENAI_API_KEY.",
    )
    max_answer_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Bound on every answer; blank: JUDGE_MAX_ANSWER_TOKENS."
    )
    temperature = models.FloatField(
        null=True, blank=True, help_text="Blank: JUDGE_TEMPERATURE (unset sends none)."
    )
    concurrency = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls in flight per worker; blank: JUDGE_CONCURRENCY."
    )
    timeout_s = models.FloatField(
        null=True, blank=True, help_text="Seconds per request; blank: JUDGE_TIMEOUT_S."
    )
    probe = models.JSONField(
        default=dict, blank=True, help_text="What the last check found the server accepts."
    )
    probed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def clean(self) -> None:
        problems: dict[str, str] = {}
        web = self.base_url.startswith(("http://", "https://"))
        if self.kind == JudgeKind.OPENAI and self.base_url and not web:
            problems["base_url"] = f"{self.base_url!r} is not an http(s) URL"
        elif web and (credential := url_credential(self.base_url)):
            # The record is shown to maintainers and its server travels in run bundles: a
            # key belongs in the worker's environment (api_key_env), never in the URL.
            problems["base_url"] = (
                f"holds {credential}; put the key in the variable api_key_env names instead"
            )
        if self.kind == JudgeKind.REPLAY and not self.base_url:
            problems["base_url"] = "a replay judge needs the folder of recorded results"
        for name in ("concurrency", "timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                problems[name] = f"must be positive, got {value}"
        if problems:
            raise ValidationError(problems)

    def __str__(self) -> str:
        return self.name
