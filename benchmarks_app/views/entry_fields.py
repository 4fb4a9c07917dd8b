"""The method fields of every submission form (name, short description, link).

Limits come from ``services.entry_metadata``, which checks the values (the link's scheme
included) and names the field at fault, as the API does.
"""

from __future__ import annotations

from django import forms

from benchmarks_app.services.entry_metadata import METHOD_LABELS, METHOD_LIMITS


def method_fields(*, shown: str = "on the board") -> tuple[forms.Field, forms.Field, forms.Field]:
    """``method_name, method_description, method_url = method_fields()`` in a form's body."""
    return (
        forms.CharField(
            label=f"{METHOD_LABELS['method_name']} (optional)",
            required=False,
            max_length=METHOD_LIMITS["method_name"],
            help_text=f"Shown {shown} next to the entry, e.g. “system prompt v2”.",
        ),
        forms.CharField(
            label=f"{METHOD_LABELS['method_description']} (optional)",
            required=False,
            max_length=METHOD_LIMITS["method_description"],
            widget=forms.Textarea(attrs={"rows": 3}),
            help_text=f"A few sentences, at most {METHOD_LIMITS['method_description']} characters.",
        ),
        forms.CharField(
            label=f"{METHOD_LABELS['method_url']} (optional)",
            required=False,
            max_length=METHOD_LIMITS["method_url"],
            help_text="A paper, repository or write-up (http or https).",
        ),
    )
