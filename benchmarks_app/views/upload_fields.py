"""The file input of every upload form: its errors name the file and the field."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError


class UploadField(forms.FileField):
    """A file input whose empty-file error names the file and the field (Django's own says
    "The submitted file is empty.", which names neither)."""

    def to_python(self, data: Any) -> Any:
        if (
            data not in self.empty_values
            and not self.allow_empty_file
            and getattr(data, "name", None)
            and not getattr(data, "size", 0)
        ):
            raise ValidationError(
                f"{data.name}: the file is empty (0 bytes); choose the file for "
                f"{self.label or 'this field'} again.",
                code="empty",
            )
        return super().to_python(data)
