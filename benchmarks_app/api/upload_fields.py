"""The API's file fields: an empty file's error names the file and the field, as the forms'
(``views.upload_fields``) do; DRF's own says "The submitted file is empty.", naming neither."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class UploadFileField(serializers.FileField):
    def to_internal_value(self, data: Any) -> Any:
        name = getattr(data, "name", None)
        if name and not getattr(data, "size", 0) and not self.allow_empty_file:
            raise serializers.ValidationError(
                f"{name}: the file is empty (0 bytes); send the file for '{self.field_name}' again",
                code="empty",
            )
        return super().to_internal_value(data)
