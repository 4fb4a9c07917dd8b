"""Curated verdicts and the review queue where maintainers settle contested judgements.

Verdicts are never edited or deleted here: settling an item again appends a verdict that
supersedes the current one (``services.curated_verdicts``), so every item keeps its history.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from benchmarks_app.models import VERDICT_CLASSES, CuratedVerdict
from benchmarks_app.selectors.judge_agreement import REASON_ORDER
from benchmarks_app.selectors.verdict_review_queue import review_evidence, review_queue
from benchmarks_app.services.curated_verdicts import CuratedVerdictError, curated_verdict_record

QUEUE_PAGE = 50


@admin.register(CuratedVerdict)
class CuratedVerdictAdmin(admin.ModelAdmin):
    change_list_template = "judging/admin/verdict_change_list.html"
    change_form_template = "judging/admin/verdict_change_form.html"
    list_display = ("item_key", "benchmark", "verdict", "source", "author", "created_at", "current")
    list_filter = ("benchmark", "verdict", "source")
    search_fields = ("item_key", "item_label", "note", "source_name")
    list_select_related = ("author", "superseded_by")
    readonly_fields = (
        "benchmark",
        "item_key",
        "item_label",
        "verdict",
        "source",
        "source_name",
        "author",
        "note",
        "supersedes",
        "created_at",
    )

    @admin.display(boolean=True, description="Current")
    def current(self, obj: CuratedVerdict) -> bool:
        return not hasattr(obj, "superseded_by")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # A current verdict can be curated again from its page: the new one supersedes it.
        found = CuratedVerdict.objects.select_related("superseded_by")
        verdict = found.filter(pk=int(object_id)).first() if object_id.isdigit() else None
        again = verdict is not None and self.current(verdict) and self._may_settle(request)
        context = {
            **(extra_context or {}),
            "curate_again": verdict if again else None,
            "verdict_classes": VERDICT_CLASSES.get(verdict.benchmark, ()) if verdict else (),
        }
        return super().change_view(request, object_id, form_url, context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # verdicts are recorded from the review queue

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        extra = [
            path(
                "review/",
                self.admin_site.admin_view(self.review_view),
                name="benchmarks_app_curatedverdict_review",
            ),
            path(
                "review/settle/",
                self.admin_site.admin_view(require_POST(self.settle_view)),
                name="benchmarks_app_curatedverdict_settle",
            ),
        ]
        return extra + super().get_urls()

    def _may_settle(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("benchmarks_app.add_curatedverdict"))

    def review_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        benchmark = request.GET.get("benchmark") or None
        if benchmark is not None and benchmark not in VERDICT_CLASSES:
            benchmark = None
        reason = request.GET.get("reason") or None
        if reason is not None and reason not in REASON_ORDER:
            reason = None
        queue = review_queue(benchmark=benchmark, reason=reason)
        page = Paginator(queue, QUEUE_PAGE).get_page(request.GET.get("page"))
        review_evidence(page.object_list)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Review queue: contested judgements",
            "page": page,
            "total": len(queue),
            "benchmark": benchmark or "",
            "reason": reason or "",
            "benchmarks": list(VERDICT_CLASSES),
            "reasons": REASON_ORDER,
            "may_settle": self._may_settle(request),
            "back": request.get_full_path(),
        }
        return TemplateResponse(request, "judging/admin/review.html", context)

    def settle_view(self, request: HttpRequest) -> HttpResponse:
        if not self._may_settle(request):
            raise PermissionDenied
        data = request.POST
        back = data.get("next") or ""
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = ""
        back = back or reverse("admin:benchmarks_app_curatedverdict_review")
        current = data.get("current") or ""
        try:
            if current and not current.isdigit():
                raise CuratedVerdictError(f"current: {current!r} is not a verdict id")
            verdict = curated_verdict_record(
                benchmark=data.get("benchmark", ""),
                item_key=data.get("item_key", ""),
                verdict=data.get("verdict", ""),
                author=request.user,
                note=data.get("note", ""),
                item_label=data.get("item_label", ""),
                expected_current_id=int(current) if current else None,
            )
        except CuratedVerdictError as exc:
            self.message_user(request, f"Not recorded: {exc}", messages.ERROR)
            return HttpResponseRedirect(back)
        self.message_user(
            request, f"Recorded {verdict.verdict!r} for {verdict.item_key}.", messages.SUCCESS
        )
        return HttpResponseRedirect(back)
