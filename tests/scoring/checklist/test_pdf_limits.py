"""Issue 23 rows 1-4: hostile PDFs are refused by the limit they aim at, before their text is
read, and what the checks miss is cut by the child process's limits; the bundled papers and
their review-mode variants pass the checks and read as before."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from pypdf import PdfReader

from benchmarks_app.bench import hostile_files
from scoring.checklist.extract import (
    ExtractionError,
    Limits,
    PdfLimits,
    extract_paper,
    extract_paper_limited,
)
from scoring.checklist.pdf_limits import check_pdf
from tests.scoring.checklist.pdf_fixtures import SAMPLE_PAPERS, review_pdf

HOSTILE: list[tuple[str, Callable[[], bytes], str]] = [
    ("tiny-operators", hostile_files.tiny_operators_pdf, "(the operator limit)"),
    ("shared-stream", hostile_files.shared_stream_pdf, "(the operator limit)"),
    ("content-bomb", hostile_files.content_bomb_pdf, "(the content size limit)"),
    ("many-pages", hostile_files.many_pages_pdf, "(the page limit)"),
    ("nested-tj", hostile_files.nested_array_pdf, "(the nesting limit)"),
]


@pytest.mark.parametrize(("name", "make", "limit"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_pdfs_are_refused_by_the_limit_they_aim_at(
    name: str, make: Callable[[], bytes], limit: str
) -> None:
    with pytest.raises(ExtractionError) as info:
        extract_paper_limited(make(), f"{name}.pdf", strict=False)
    assert info.value.file == f"{name}.pdf"
    assert str(info.value).startswith(f"{name}.pdf: ") and limit in str(info.value)


def test_a_stream_shared_by_pages_counts_once_per_page() -> None:
    limits = PdfLimits(max_operators=100_000)
    one_use = PdfReader(io.BytesIO(hostile_files.shared_stream_pdf(10_000, pages=4)))
    assert check_pdf(one_use, limits) == 4  # 4 x 20,000 operators and operands: under
    forty_uses = PdfReader(io.BytesIO(hostile_files.shared_stream_pdf(10_000, pages=40)))
    with pytest.raises(ExtractionError, match="operator limit"):
        check_pdf(forty_uses, limits)


def test_the_page_tree_is_counted_even_when_its_count_lies() -> None:
    data = hostile_files.many_pages_pdf(40).replace(b"/Count 40", b"/Count 1")
    with pytest.raises(ExtractionError, match=r"more than 30 pages.*page limit"):
        check_pdf(PdfReader(io.BytesIO(data)), PdfLimits(max_pages=30))


def test_deep_nesting_past_the_checks_is_an_error_not_a_recursion_error() -> None:
    # With the nesting check out of the way pypdf's parser recurses into the array.
    lax = PdfLimits(max_nesting=10**6)
    with pytest.raises(ExtractionError) as info:
        extract_paper_limited(hostile_files.nested_array_pdf(), "deep.pdf", pdf_limits=lax)
    assert "nested too deeply" in str(info.value) and "Recursion" not in str(info.value)
    assert info.value.file == "deep.pdf"


def test_work_past_the_checks_is_cut_by_the_time_limit() -> None:
    lax = PdfLimits(max_operators=10**9, max_content_bytes=2**30)
    with pytest.raises(ExtractionError) as info:
        extract_paper_limited(
            hostile_files.tiny_operators_pdf(),
            "slow.pdf",
            pdf_limits=lax,
            limits=Limits(cpu_seconds=1, wall_seconds=5),
        )
    assert "(the time limit)" in str(info.value) and info.value.file == "slow.pdf"


@pytest.mark.parametrize("name", ["AutoSurvey.pdf", "MetaAlbum.pdf"])
def test_bundled_papers_read_the_same_in_the_child(name: str) -> None:
    data = (SAMPLE_PAPERS / name).read_bytes()
    # Generous time: this is about the result, and a loaded test machine is slow.
    paper = extract_paper_limited(data, name, strict=True, limits=Limits(60, 120))
    assert paper.complete and len(paper.answers) == 15
    assert paper == extract_paper(data, name, strict=True)


@pytest.mark.parametrize("name", ["AutoSurvey.pdf", "MetaAlbum.pdf"])
def test_review_mode_papers_pass_the_checks(name: str) -> None:
    for data in ((SAMPLE_PAPERS / name).read_bytes(), review_pdf(name, "start", 3)):
        reader = PdfReader(io.BytesIO(data))
        assert check_pdf(reader, PdfLimits()) == len(reader.pages)


def test_a_malformed_page_tree_is_an_error_in_words() -> None:
    data = hostile_files.many_pages_pdf(3).replace(b"/Kids [", b"/Kids [7 ", 1)
    with pytest.raises(ExtractionError) as info:
        extract_paper_limited(data, "odd.pdf")
    assert info.value.file == "odd.pdf" and "attribute" not in str(info.value)
