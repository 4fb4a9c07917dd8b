"""Cleaning a PDF's text layer: review-mode line numbers, running headers, ligatures."""

from __future__ import annotations

from scoring.checklist.pdf_text import clean_pages, join_hyphenated, normalize_characters
from scoring.checklist.segment import read_checklist_text


def _prose(n: int, tag: str = "") -> list[str]:
    """Distinct lines, many of them ending in digits of their own."""
    ends = ["on Table 3", "with accuracy 0.95", "in 2024", "as in [12]", "of the paper.", "below"]
    return [f"Line {tag}{i} of the text, {ends[i % len(ends)]}" for i in range(n)]


PROSE = _prose(6)


def _numbered(lines: list[str], first: int, *, where: str = "end", pad: int = 0) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        label = str(first + i).zfill(pad)
        out.append(f"{line}{label}" if where == "end" else f"{label} {line}")
    return out


def test_line_numbers_glued_to_line_ends_are_removed_and_text_digits_kept() -> None:
    text = _prose(40)
    lines = _numbered(text, 637)
    assert lines[0] == "Line 0 of the text, on Table 3637"
    assert lines[3] == "Line 3 of the text, as in [12]640"
    clean = clean_pages(["\n".join(lines[:20]), "\n".join(lines[20:])])
    assert clean.text.splitlines() == text
    assert clean.notes == ["review-mode line numbers removed (40 lines)"]
    assert clean.page_at(clean.text.index("Line 19 ")) == 1
    assert clean.page_at(clean.text.index("Line 20 ")) == 2


def test_zero_padded_numbers_at_line_starts_restarting_each_page() -> None:
    texts = [_prose(30, tag=f"p{page}-") for page in range(3)]
    pages = ["\n".join(_numbered(text, 0, where="start", pad=3)) for text in texts]
    assert pages[1].startswith("000 Line p1-0 ")
    clean = clean_pages(pages)
    assert clean.text.splitlines() == [line for text in texts for line in text]


def test_numbers_alone_on_their_lines_are_removed() -> None:
    text = _prose(20)
    lines = [x for i, line in enumerate(text) for x in (str(40 + i), line)]
    assert clean_pages(["\n".join(lines)]).text.splitlines() == text


def test_unnumbered_text_with_numbers_is_left_alone() -> None:
    """Numbered lists, years and table values never form a long +1 chain."""
    lines = [f"{n}. Item number {n}" for n in range(1, 16)]
    lines += [f"Result {v} at epoch {10 * v}" for v in range(70, 90)]
    lines += _prose(60)
    clean = clean_pages(["\n".join(lines)])
    assert clean.text.splitlines() == lines
    assert clean.notes == []


def test_running_header_footer_and_page_numbers_are_removed_but_checklist_lines_kept() -> None:
    pages = []
    for n in range(1, 6):
        body = ["Guidelines:", *_prose(8, tag=f"p{n}-"), "Answer: [Yes]"]
        header = "Under review as a conference paper at NeurIPS 2024"
        pages.append("\n".join([header, *body, f"Preprint {n}", str(n)]))
    clean = clean_pages(pages)
    assert "Under review" not in clean.text and "Preprint" not in clean.text
    assert clean.text.count("Guidelines:") == 5 and clean.text.count("Answer: [Yes]") == 5
    assert clean.text.count("Line ") == 40
    assert not any(line.strip().isdigit() for line in clean.text.splitlines())
    assert "running headers/footers removed (10 lines)" in clean.notes


def test_ligatures_soft_hyphens_and_line_end_hyphenation() -> None:
    assert normalize_characters("ﬁne-tuned ﬂow e\u00adcient\u00a0x") == "fine-tuned flow ecient x"
    assert join_hyphenated("Experi-\nments and AI-\nReviewer") == "Experiments and AI-Reviewer"


def test_justification_split_by_a_page_break_with_header_between() -> None:
    """A question whose justification runs onto the next page, with the footer, the page
    number and the next page's header in between, reads as one justification."""
    header = "Meta-Dataset for Few-Shot Learning"
    first = [header, "NeurIPS Paper Checklist", "1. Claims", "Question: Do the main claims?"]
    first += ["Answer: [Yes] ", "Justification: The abstract states the contri-", "4"]
    second = [header, "butions of the paper.", "Guidelines:", "• The answer NA means...", "5"]
    filler = [[header, "Appendix text.", "More appendix.", str(n)] for n in range(1, 4)]
    pages = ["\n".join(p) for p in [*filler, first, second]]
    clean = clean_pages(pages)
    answers, _ = read_checklist_text(clean.text[clean.text.index("NeurIPS") :])
    assert answers[0].answer == "Yes"
    assert answers[0].justification == "The abstract states the contributions of the paper."
    assert [a.status for a in answers[1:]] == ["missing"] * 14
