"""The judge ledger in the admin: each call with its run, the run piece (audit repo) it
served, its prompt, request options, raw answer and parsed verdict; and the cached verdicts.

Read-only, like the run results (:mod:`.runs`): a call is a record of what was asked and
answered. A cached verdict may be deleted, so that the next run asks the judge again.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import CharField, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Cast, Greatest, StrIndex, Substr
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from benchmarks_app.admin.runs import ReadOnlyAdmin, judge_named
from benchmarks_app.formatting import whole_number
from benchmarks_app.models import EvaluationRun, JudgeCacheEntry, JudgeCall, JudgePrompt, RunPiece


class JudgeCallRunFilter(admin.SimpleListFilter):
    """``?run=<id>``: one run's calls (the run's admin page links here); the latest runs with
    calls are offered in the sidebar."""

    title = "run"
    parameter_name = "run"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        latest = list(
            EvaluationRun.objects.filter(judge_calls__isnull=False)
            .distinct()
            .order_by("-id")
            .values_list("pk", flat=True)[:15]
        )
        chosen = self.value()
        chosen_id = whole_number(chosen)
        if chosen_id is not None and chosen_id not in latest:
            latest.insert(0, chosen_id)
        return [(str(pk), f"#{pk}") for pk in latest]

    def queryset(self, request: HttpRequest, queryset: QuerySet[JudgeCall]) -> Any:
        value = self.value()
        if not value:
            return queryset
        if not value.isascii() or not value.isdigit() or len(value) > 18:
            return queryset.none()
        return queryset.filter(run_id=int(value))


def _with_piece(queryset: QuerySet[JudgeCall]) -> QuerySet[JudgeCall]:
    """Each call with the key of the run piece whose lease made it (``holder`` is
    ``<piece id>:<attempt>``): the audit repo it served; empty for a single-piece run."""
    # Greatest: PostgreSQL refuses a negative length where a call has no holder (no ":").
    holder_piece = Substr("holder", 1, Greatest(StrIndex("holder", Value(":")) - 1, Value(0)))
    pieces = RunPiece.objects.annotate(pk_text=Cast("pk", CharField())).filter(
        pk_text=OuterRef("holder_piece")
    )
    return queryset.annotate(holder_piece=holder_piece).annotate(
        piece_key=Subquery(pieces.values("key")[:1]),
        piece_attempt=Subquery(pieces.values("attempt")[:1], output_field=IntegerField()),
    )


NOT_STORED_PROMPT = (
    "Not stored: recorded before the ledger kept prompts, or asked of a judge that sends none "
    "(offline, replay). The prompt's hash (above) is also the key of its cached verdict."
)


# Judges that compute their verdict locally: there is never a server response to keep.
LOCAL_JUDGES = frozenset({"offline", "replay"})


NOT_STORED_RESPONSE = (
    "Not stored: recorded before the ledger kept raw responses. For an answered call the "
    "parsed verdict below is what the judge answered."
)


# A checklist prompt holds a whole paper: the page shows this much of the user text.
PROMPT_SHOWN_CHARS = 20_000


def _pre(text: str) -> str:
    return format_html('<pre style="white-space: pre-wrap; max-height: 40em">{}</pre>', text)


@admin.register(JudgeCall)
class JudgeCallAdmin(ReadOnlyAdmin):
    """The judge ledger: each call with its run, the piece (audit repo) it served, how it
    ended, and the verdict it gave (from the verdict cache, keyed by the prompt's hash)."""

    list_display = (
        "created_at",
        "run_link",
        "item",
        "status",
        "judge_name",
        "model",
        "vote_number",
        "attempt",
        "latency_ms",
        "tokens_in",
        "tokens_out",
    )
    list_filter = (JudgeCallRunFilter, "status", "judge", "model")
    search_fields = ("prompt_hash", "error")
    list_select_related = ("run", "run__judge_record")
    fields = (
        "run_link",
        "item",
        "status",
        "judge_name",
        "model",
        "vote_number",
        "attempt",
        "created_at",
        "latency_ms",
        "tokens_in",
        "tokens_out",
        "tokens_reasoning",
        "tokens_cached",
        "request_options",
        "holder",
        "prompt_hash",
        "error",
        "prompt",
        "raw_answer",
        "parsed_verdict",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[JudgeCall]:
        return _with_piece(super().get_queryset(request))

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: JudgeCall) -> str:
        if obj.run_id is None:
            return "—"
        url = reverse("admin:benchmarks_app_evaluationrun_change", args=[obj.run_id])
        calls = reverse("admin:benchmarks_app_judgecall_changelist") + f"?run={obj.run_id}"
        return format_html(
            '<a href="{}">run #{}</a> · <a href="{}">its calls</a>', url, obj.run_id, calls
        )

    @admin.display(description="Judge", ordering="judge")
    def judge_name(self, obj: JudgeCall) -> str:
        return judge_named(obj.run, obj.judge) if obj.run is not None else obj.judge

    @admin.display(description="Item")
    def item(self, obj: JudgeCall) -> str:
        key = getattr(obj, "piece_key", None)
        attempt = getattr(obj, "piece_attempt", None)
        if key is None:
            return "—"
        where = f"repo {key}" if key else "whole run"
        return f"{where} (lease attempt {attempt})" if attempt else where

    @admin.display(description="Prompt")
    def prompt(self, obj: JudgeCall) -> str:
        stored = JudgePrompt.objects.filter(key=obj.prompt_key).first() if obj.prompt_key else None
        if stored is None:
            return NOT_STORED_PROMPT
        user = stored.user
        notes = []
        if len(user) > PROMPT_SHOWN_CHARS:
            notes.append(
                f"User text cut at {PROMPT_SHOWN_CHARS:,} of {len(user):,} characters "
                f"(prompt {stored.key})."
            )
            user = user[:PROMPT_SHOWN_CHARS]
        if obj.attempt > 1:
            notes.append(
                "A re-ask after an invalid answer sends this question followed by a short "
                "correction note."
            )
        return format_html(
            "<strong>System</strong>{}<strong>User</strong>{}{}",
            _pre(stored.system),
            _pre(user),
            format_html_join("", "<p><em>{}</em></p>", [(n,) for n in notes]),
        )

    @admin.display(description="Request options")
    def request_options(self, obj: JudgeCall) -> str:
        if not obj.request:
            if obj.status == "cached":
                return "None: a cache hit asks no server."
            return "Not recorded (a judge that asks no server, or an older row)."
        rows = [(k, json.dumps(v)) for k, v in sorted(obj.request.items())]
        return format_html(
            "<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
        )

    # Not named raw_response: the model's field of that name would be shown instead.
    @admin.display(description="Raw response")
    def raw_answer(self, obj: JudgeCall) -> str:
        if obj.raw_response:
            return _pre(obj.raw_response)
        if obj.status == "cached":
            return "None: a cache hit asks no server (the verdict below is the cached answer)."
        if obj.status in ("pending", "lost"):
            return "None: no answer came back."
        if obj.prompt_key:
            return "Empty: the server returned no text."
        if obj.judge.split(":", 1)[0] in LOCAL_JUDGES:
            return (
                f"None: the {obj.judge.split(':', 1)[0]} judge answers in this process and asks "
                "no server; the parsed verdict below is its answer."
            )
        return NOT_STORED_RESPONSE

    @admin.display(description="Parsed verdict")
    def parsed_verdict(self, obj: JudgeCall) -> str:
        entry = JudgeCacheEntry.objects.filter(key=obj.prompt_hash).first()
        if entry is None:
            return "—" if obj.status not in ("ok", "cached") else "Not in the cache any more."
        text = json.dumps(entry.response, indent=2, sort_keys=True, ensure_ascii=False)
        url = reverse("admin:benchmarks_app_judgecacheentry_change", args=[entry.pk])
        return format_html_join("", '<pre>{}</pre><a href="{}">cache entry</a>', [(text, url)])


@admin.register(JudgeCacheEntry)
class JudgeCacheEntryAdmin(ReadOnlyAdmin):
    """Cached verdicts: deleting one only makes the next run ask the judge again."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm("benchmarks_app.delete_judgecacheentry"))

    list_display = ("key", "judge", "model", "prompt_version", "vote_number", "created_at")
    list_filter = ("judge", "model", "prompt_version")
    search_fields = ("key",)
