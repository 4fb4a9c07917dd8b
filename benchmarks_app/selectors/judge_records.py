"""Reads of the judge records staff may start runs with."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from benchmarks_app.models import JudgeRecord
from benchmarks_app.models.judge_records import DEFAULT_JUDGE_RECORD_NAMES

# The records made from the site's settings: the forms offer them under their own labels.
DEFAULT_NAMES = DEFAULT_JUDGE_RECORD_NAMES


def judge_server(base_url: str) -> str:
    """The scheme and host of a judge's base URL, never its user, password, path or query:
    a key put in the URL (``https://user:KEY@host/v1``) must not reach a page."""
    parts = urlsplit(base_url)
    if not parts.scheme or not parts.hostname:
        return "a configured server"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def judge_record_label(record: JudgeRecord) -> str:
    """What a form calls a record: its name, kind, and model and server where it has them."""
    if record.kind == "openai":
        where = f" at {judge_server(record.base_url)}" if record.base_url else ""
        return f"{record.name} (judge record: {record.model or 'JUDGE_MODEL'}{where})"
    return f"{record.name} (judge record: {record.get_kind_display().lower()})"


def judge_record_choices(*, kinds: Iterable[str]) -> list[tuple[str, str]]:
    """(name, label) of the curated records of ``kinds``, by name, the default records left
    out (the forms already offer them)."""
    records = JudgeRecord.objects.filter(kind__in=list(kinds)).exclude(name__in=DEFAULT_NAMES)
    return [(r.name, judge_record_label(r)) for r in records.order_by("name")]
