"""Pagination shared by every list endpoint."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class StandardPagination(PageNumberPagination):
    """``?page=N&page_size=M``: 50 rows by default, at most 500 (a leaderboard fits in a few)."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
