"""Pagination shared by every list endpoint."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from benchmarks_app.formatting import whole_number
from benchmarks_app.selectors.board_ordering import KeysFirstPaginator, KeysPaginator


class StandardPagination(PageNumberPagination):
    """``?page=N&page_size=M``: 50 rows by default, at most 500 (a leaderboard fits in a few).

    A ``page_size`` that is not a whole number from 1 to 500 is a 400 (not silently the
    default), and a ``page`` past the end a 404, as the schema says.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.getlist(self.page_size_query_param)
        if not raw:
            return self.page_size
        if len(raw) > 1 or not raw[0].isascii() or not raw[0].isdigit():
            raise ValidationError({self.page_size_query_param: ["Must be one whole number."]})
        size = whole_number(raw[0], maximum=self.max_page_size)
        if size is None or size < 1:
            raise ValidationError(
                {self.page_size_query_param: [f"Must be from 1 to {self.max_page_size}."]}
            )
        return size

    def get_page_number(self, request: Request, paginator: Any) -> Any:
        pages = request.query_params.getlist(self.page_query_param)
        if pages and (len(pages) > 1 or not pages[0]):
            raise NotFound("Invalid page: give one page number.")
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
            elif parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_page_size,
                    "default": self.page_size,
                }
        return parameters


class KeysFirstPagination(StandardPagination):
    """:class:`StandardPagination` reading a page by its rows' keys first
    (:class:`KeysFirstPaginator`): for long lists whose order an index serves."""

    django_paginator_class = KeysFirstPaginator


class BoardPagination(KeysFirstPagination):
    """The boards' pages: any page of 100,000 rows costs about what the first does."""


class BoardKeysPagination(StandardPagination):
    """A board's pages as lists of row keys (:class:`KeysPaginator`), for a view that reads
    the page's rows itself: past the middle, read from the board's far end."""

    django_paginator_class = KeysPaginator
