"""The API's JSON parser: DRF's, without Python's internals in its errors.

DRF answers a body it cannot decode with ``JSON parse error - <the exception>``; for an
integer over Python's digit limit that exception tells the client to call
``sys.set_int_max_str_digits()``. This one says the number is too large instead.
"""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ErrorDetail, ParseError
from rest_framework.utils.json import strict_constant

from scoring.json_text import NumberTooLarge, json_loads


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return json_loads(text, parse_constant=strict_constant if self.strict else None)
        except NumberTooLarge as exc:
            detail = f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            raise ParseError({"body": [ErrorDetail(detail, code="parse_error")]}) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
