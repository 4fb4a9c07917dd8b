"""The method an entry carries (name, short description, link): one check for every benchmark.

Each benchmark's submission service turns the problems into its own refusal (an audit
``AuditRunError``, a probe ``ProbeFormatError``, a checklist ``ChecklistSubmissionError``), so
that forms and the API name the field as they do for the benchmark's other fields.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

METHOD_LIMITS = {"method_name": 100, "method_description": 500, "method_url": 500}
METHOD_LABELS = {
    "method_name": "Method name",
    "method_description": "Method description",
    "method_url": "Method link",
}


def method_metadata_check(
    *, method_name: Any = "", method_description: Any = "", method_url: Any = ""
) -> tuple[dict[str, str], dict[str, str]]:
    """(the cleaned values, {field: problem}) of an entry's method.

    Texts are trimmed (runs of spaces in the name become one), must fit their limits and hold
    no NUL character; the link, when given, must be an http(s) URL. Missing values are "".
    """
    given = {
        "method_name": method_name,
        "method_description": method_description,
        "method_url": method_url,
    }
    values: dict[str, str] = {}
    problems: dict[str, str] = {}
    for field, value in given.items():
        if value is None:
            value = ""
        if not isinstance(value, str):
            problems[field] = "expected text"
            values[field] = ""
            continue
        value = " ".join(value.split()) if field == "method_name" else value.strip()
        values[field] = value
        if "\x00" in value:
            problems[field] = "holds a NUL character (\\u0000)"
        elif len(value) > METHOD_LIMITS[field]:
            problems[field] = f"at most {METHOD_LIMITS[field]} characters (got {len(value)})"
    url = values["method_url"]
    if url and "method_url" not in problems:
        try:
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            problems["method_url"] = "not a valid http(s) link, e.g. https://example.org/paper"
    return values, problems
