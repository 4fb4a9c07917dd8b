"""Phases of all three benchmarks: dates, quotas, hidden boards and their reveal.

The form derives the benchmark from the phase's target (challenge, dataset release or probe
suite), so a phase is made the same way here and in :class:`PhaseInline` under its target.
Revealing or hiding a board rebuilds nothing: rows of hidden phases exist already, and who
may read them is decided when reading.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from benchmarks_app.models import Benchmark, Phase
from benchmarks_app.services.phases import phase_boards_refresh, phase_hide, phase_reveal

_TARGETS = (
    ("challenge", Benchmark.CHECKLIST),
    ("release", Benchmark.AUDIT),
    ("suite", Benchmark.PROBES),
)


class PhaseForm(forms.ModelForm):
    """A phase of exactly one target; its benchmark follows from the target."""

    class Meta:
        model = Phase
        fields = (
            "challenge",
            "release",
            "suite",
            "name",
            "slug",
            "description",
            "starts_at",
            "ends_at",
            "is_hidden",
            "daily_limit",
            "total_limit",
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        chosen = []
        for field, benchmark in _TARGETS:
            # Under an inline the parent is not a form field: it is set on the instance.
            value = data.get(field) if field in self.fields else None
            if value is None and getattr(self.instance, f"{field}_id", None) is not None:
                value = getattr(self.instance, field)
            if value is not None:
                chosen.append((field, benchmark))
        if len(chosen) != 1:
            raise forms.ValidationError(
                "A phase belongs to exactly one of: a checklist challenge, an audit dataset "
                f"release or a probe suite (given: {', '.join(f for f, _ in chosen) or 'none'})."
            )
        self.instance.benchmark = chosen[0][1]
        starts, ends = data.get("starts_at"), data.get("ends_at")
        if starts and ends and ends <= starts:
            self.add_error("ends_at", "The phase must end after it starts.")
        return data


class PhaseInline(admin.TabularInline):
    """Phases under their target's admin page (the challenge, release or suite)."""

    model = Phase
    form = PhaseForm
    extra = 0
    fields = (
        "name",
        "slug",
        "starts_at",
        "ends_at",
        "is_hidden",
        "revealed_at",
        "daily_limit",
        "total_limit",
    )
    readonly_fields = ("revealed_at",)
    prepopulated_fields = {"slug": ("name",)}
    show_change_link = True


@admin.action(description="Reveal board (make the hidden phase's board public)")
def reveal_board(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Phase]
) -> None:
    revealed = [phase_reveal(phase=phase) for phase in queryset]
    messages.success(request, f"Revealed the board of {len(revealed)} phase(s).")


@admin.action(description="Hide board (back to staff-only until revealed)")
def hide_board(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Phase]
) -> None:
    hidden = 0
    for phase in queryset:
        if not phase.is_hidden:
            messages.warning(
                request, f"{phase}: not a hidden phase, its board stays public (edit 'is hidden')."
            )
            continue
        phase_hide(phase=phase)
        hidden += 1
    if hidden:
        messages.success(request, f"Hid the board of {hidden} phase(s).")


@admin.register(Phase)
class PhaseAdmin(admin.ModelAdmin):
    form = PhaseForm
    list_display = (
        "name",
        "benchmark",
        "target_name",
        "starts_at",
        "ends_at",
        "open_now",
        "is_hidden",
        "revealed_at",
        "daily_limit",
        "total_limit",
    )
    list_filter = ("benchmark", "is_hidden", "challenge", "release", "suite")
    search_fields = ("name", "slug", "challenge__name", "suite__name")
    list_select_related = ("challenge", "release", "suite")
    readonly_fields = ("benchmark", "revealed_at")
    prepopulated_fields = {"slug": ("name",)}
    actions = [reveal_board, hide_board]

    def save_model(self, request: HttpRequest, obj: Phase, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Dates and the hidden flag decide which entries other boards list.
        phase_boards_refresh(phase=obj)

    @admin.display(description="Target")
    def target_name(self, phase: Phase) -> str:
        return str(phase.target or "—")

    @admin.display(description="Open now", boolean=True)
    def open_now(self, phase: Phase) -> bool:
        return phase.is_open(timezone.now())
