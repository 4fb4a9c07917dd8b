"""A PDF's title is read whole, however many lines the layout broke it into (issue 13).

The title used to be the first long line of text: "Meta-Album: Multi-domain Meta-Dataset for",
cut at the line break. It is now the first page's largest text, all its lines.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from scoring.checklist.extract import _pdf_title, extract_pdf
from scoring.checklist.pdf_text import title_from_runs
from tests.scoring.checklist.pdf_fixtures import _show, _write_pdf, review_pdf

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = ROOT / "benchmarks_app" / "sample_data" / "checklist" / "papers"
SHARED = ROOT.parent / "shared" / "data" / "checklist" / "papers"
TITLES = {
    "AutoSurvey.pdf": (
        "Auto-survey Challenge: Advancing the Frontiers of Automated Literature Review"
    ),
    "MetaAlbum.pdf": "Meta-Album: Multi-domain Meta-Dataset for Few-Shot Image Classification",
}


def _papers() -> list[Path]:
    papers = [BUNDLED / name for name in TITLES]
    papers += [SHARED / name for name in TITLES if (SHARED / name).exists()]
    return papers


@pytest.mark.parametrize("path", _papers(), ids=lambda p: f"{p.parent.parent.parent.name}/{p.name}")
def test_sample_papers_titles_are_read_whole(path: Path) -> None:
    paper = extract_pdf(path.read_bytes(), strict=False)
    # Both titles are set on two or three lines; the footnote star after "Review" is left out.
    assert paper.title == TITLES[path.name]


@pytest.mark.parametrize("name", TITLES)
@pytest.mark.parametrize("where", ["end", "start"])
def test_review_mode_line_numbers_do_not_change_the_title(name: str, where: str) -> None:
    assert extract_pdf(review_pdf(name, where), strict=False).title == TITLES[name]


def _two_line_title_pdf(*lines: str, title_size: float = 17) -> bytes:
    page = b"".join(
        [
            _show(72, 740, "Under review as a conference paper", size=8),  # running header
            *(_show(90, 700 - 20 * i, line, size=title_size) for i, line in enumerate(lines)),
            _show(300, 668, "1", size=7),  # a footnote mark after the title
            _show(200, 640, "Ada Lovelace, Alan Turing", size=10),
            _show(250, 600, "Abstract", size=12),
            _show(72, 580, "We read titles that the layout broke into several lines.", size=9),
        ]
    )
    return _write_pdf([page])


def test_a_generated_two_line_title_is_joined() -> None:
    data = _two_line_title_pdf("Reading Titles Whole: Line Breaks in", "Typeset Paper Headings")
    reader = PdfReader(io.BytesIO(data))
    assert _pdf_title(reader, "") == ("Reading Titles Whole: Line Breaks in Typeset Paper Headings")


def test_a_compound_broken_at_its_hyphen_keeps_the_hyphen() -> None:
    data = _two_line_title_pdf("Self-Supervised Meta-", "Learning for Few-Shot Tasks")
    assert _pdf_title(PdfReader(io.BytesIO(data)), "") == (
        "Self-Supervised Meta-Learning for Few-Shot Tasks"
    )


def _with_metadata_title(data: bytes, title: str) -> PdfReader:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.add_metadata({"/Title": title})
    buffer = io.BytesIO()
    writer.write(buffer)
    return PdfReader(io.BytesIO(buffer.getvalue()))


def test_a_real_metadata_title_wins_and_a_file_name_does_not() -> None:
    data = _two_line_title_pdf("A Title Set On", "Two Lines")
    assert _pdf_title(_with_metadata_title(data, "The Author's  Own Title"), "") == (
        "The Author's Own Title"
    )
    assert _pdf_title(_with_metadata_title(data, "main.tex"), "") == "A Title Set On Two Lines"


def test_title_from_runs_takes_the_largest_text_and_its_lines_only() -> None:
    runs = [
        ("Header line", 8.0),
        ("First line of the\n", 17.2),
        ("\u2217", 12.0),  # a footnote star inside the title's stretch is left out
        ("second line", 17.2),
        ("Author Name", 10.0),
        ("Later Big Heading", 17.2),  # a second stretch in the same size is not the title
    ]
    assert title_from_runs(runs) == "First line of the second line"
    # A large page number or a logo letter is not a title; nothing sized is nothing.
    assert title_from_runs([("7", 30.0), ("A Title In The Page", 16.0)]) == "A Title In The Page"
    assert title_from_runs([("Q", 30.0)]) == ""
    assert title_from_runs([("no size", 0.0)]) == ""


def test_text_without_font_sizes_falls_back_to_the_first_long_line() -> None:
    class NoPages:
        metadata = None
        pages: list[object] = []

    assert _pdf_title(NoPages(), "ab\nA Long Enough First Line\nnext") == "A Long Enough First Line"
