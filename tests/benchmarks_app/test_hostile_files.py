# mypy: disable-error-code="union-attr"
"""The hostile files of issue 23 have the shape their rows describe (the bench and the tests
rely on it): small on the wire, large once read."""

from __future__ import annotations

import io
import zlib

from pypdf import PdfReader

from benchmarks_app.bench import hostile_files


def _reader(data: bytes) -> PdfReader:
    return PdfReader(io.BytesIO(data))


def test_shared_stream_is_one_object_behind_forty_pages() -> None:
    data = hostile_files.shared_stream_pdf()
    assert len(data) < 10_000
    pages = _reader(data).pages
    assert len(pages) == 40
    assert len({page.get("/Contents").idnum for page in pages}) == 1


def test_the_bomb_inflates_to_seventy_mb_from_a_small_file() -> None:
    data = hostile_files.content_bomb_pdf()
    assert len(data) < 250_000
    stream = _reader(data).pages[0].get("/Contents").get_object()
    assert len(zlib.decompress(stream._data)) >= 70 * 2**20


def test_tiny_operators_and_pages_and_nesting() -> None:
    tiny = hostile_files.tiny_operators_pdf()
    stream = _reader(tiny).pages[0].get("/Contents").get_object()
    assert len(tiny) < 30_000
    assert zlib.decompress(stream._data).count(b"Tj") == hostile_files.TINY_OPERATORS
    assert len(_reader(hostile_files.many_pages_pdf()).pages) == 5000
    nested = _reader(hostile_files.nested_array_pdf()).pages[0].get("/Contents").get_object()
    assert b"[" * 5000 in zlib.decompress(nested._data)


def test_rows_five_and_six_have_the_issues_sizes() -> None:
    csv = hostile_files.probe_csv()
    assert csv.count(b"\n") == 1_000_001 and 10_000_000 < len(csv) < 12_000_000
    title = hostile_files.audit_results()["findings"][0]["title"]  # type: ignore[index]
    assert len(title) == 15_000_000
