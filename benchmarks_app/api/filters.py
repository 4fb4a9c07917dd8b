"""Query parameters every API module reads the same way.

Booleans: ``1``/``0``, ``true``/``false`` and ``yes``/``no`` (any case) or absent. Anything
else is a 400 naming the parameter: django-filter's own boolean filter drops a value it does
not know (``?mine=1`` on a method filter, ``?mine=maybe`` anywhere) and answers as if no filter
had been asked for, which reads as "these are your runs" while listing everybody's.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

TRUE_WORDS = frozenset({"1", "true", "yes"})
FALSE_WORDS = frozenset({"0", "false", "no"})
BOOLEAN_HELP = "Must be one of 1, 0, true, false, yes, no."
# What the schema promises: exactly the words accepted (any case), or empty for no filter.
BOOLEAN_SCHEMA = {
    "type": "string",
    "pattern": "^(|1|0|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|[Yy][Ee][Ss]|[Nn][Oo])$",
    "description": "1, true or yes; 0, false or no (any case).",
}


def parse_bool(value: Any) -> bool | None:
    """``True``/``False`` for a boolean word, ``None`` when empty; :class:`ValueError` else."""
    if value is None or value is True or value is False:
        return value
    text = str(value).lower()
    if not text:
        return None
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError(f"{str(value)[:40]!r} is not a boolean. {BOOLEAN_HELP}")


def query_bool(request: Request, name: str, default: bool | None = None) -> bool | None:
    """A boolean query parameter of a view that reads ``query_params`` itself (400 if bad)."""
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) > 1:
        raise ValidationError({name: ["Give it once."]})
    try:
        parsed = parse_bool(values[0])
    except ValueError as exc:
        raise ValidationError({name: [str(exc)]}) from None
    return default if parsed is None else parsed


class StrictBooleanField(forms.NullBooleanField):
    """A form field over :func:`parse_bool`: a bad value is an error, not "no filter"."""

    widget = forms.TextInput  # the raw text: a select widget turns junk into "unknown"

    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]
        try:
            return parse_bool(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None

    def validate(self, value: Any) -> None:
        return None


@extend_schema_field(BOOLEAN_SCHEMA)
class StrictBooleanFilter(django_filters.BooleanFilter):
    """``django_filters.BooleanFilter`` that accepts 1/0/true/false/yes/no and refuses the rest.

    Works with ``method=`` too; the schema still shows a boolean.
    """

    field_class = StrictBooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.TextInput)
        kwargs.setdefault("help_text", BOOLEAN_HELP)
        super().__init__(*args, **kwargs)
