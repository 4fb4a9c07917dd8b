"""The OpenAPI schema class: every operation documents the errors it can answer with.

Every endpoint can answer 401 (a bad or expired token is refused even where reading is
public), 403, 404 (no such object, or a page past the end), 429 (throttled) and 400 (an
invalid query parameter or body); one that reads a body also 413 and 415; one that reads a
participant's file (a paper, a results file: ``reads_participant_files`` on the view or its
method) also 503, the site's readers all busy. All of them have the one error shape of
:mod:`benchmarks_app.api.exceptions`.
"""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

ERROR_DESCRIPTIONS = {
    "400": "The query parameters or the body are invalid; `errors` names each field.",
    "401": "Authentication is missing or invalid (a bad token is refused everywhere).",
    "403": "Authenticated, but not allowed to do this.",
    "404": "No such object (or not visible to you), or a page past the end.",
    "429": "Too many requests; retry after the `Retry-After` header's seconds.",
}
BODY_ERROR_DESCRIPTIONS = {
    "413": "The body is larger than the server accepts.",
    "415": "The body's content type is not one this endpoint reads.",
}
BUSY_DESCRIPTIONS = {
    "503": "The site is reading as many participants' files as it reads at once (`code`: "
    "`readers_busy`); nothing was stored. Send the same request again after the "
    "`Retry-After` header's seconds.",
}


class ErrorItemSerializer(serializers.Serializer):
    field = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    code = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the documented error responses of every operation."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        filterset = getattr(self.view, "filterset_class", None)
        if operation is None or filterset is None:
            return operation
        for parameter in operation.get("parameters", []):
            field = filterset.base_filters.get(parameter["name"])
            # A whole-number filter (an id) is an integer, not any number.
            if (
                parameter["in"] == "query"
                and isinstance(field, django_filters.NumberFilter)
                and field.extra.get("decimal_places") == 0
            ):
                schema: dict[str, Any] = {"type": "integer"}
                for bound, key in (("min_value", "minimum"), ("max_value", "maximum")):
                    if field.extra.get(bound) is not None:
                        schema[key] = field.extra[bound]
                parameter["schema"] = schema
        return operation

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        descriptions = dict(ERROR_DESCRIPTIONS)
        if self.method in ("POST", "PUT", "PATCH"):
            descriptions.update(BODY_ERROR_DESCRIPTIONS)
            handler = getattr(self.view, self.method.lower(), None)
            if any(getattr(o, "reads_participant_files", False) for o in (self.view, handler)):
                descriptions.update(BUSY_DESCRIPTIONS)
        for code, description in descriptions.items():
            if code not in responses:
                body = self._get_response_for_code(ErrorSerializer, code, direction=direction)
                body["description"] = description
                responses[code] = body
        # A path that does not route (``/runs/abc/``) gets Django's own 404 page.
        responses["404"].setdefault("content", {})["text/html"] = {"schema": {"type": "string"}}
        return dict(sorted(responses.items()))
