"""Real submissions' layouts, made at test time from the bundled (openly licensed) paper:
review-mode line numbers, two columns, running headers, ligatures, hyphenation, answer
spellings, a justification split by a page break, an appendix after the checklist, and a
question that is missing."""

from __future__ import annotations

import functools
import io
import re

import pytest
from pypdf import PdfReader

from scoring.checklist.extract import ExtractedPaper, ExtractionError, extract_paper
from tests.scoring.checklist.pdf_fixtures import (
    SAMPLE_PAPERS,
    Layout,
    checklist_lines,
    drop_questions,
    review_pdf,
    typeset,
)

PAPER = SAMPLE_PAPERS / "AutoSurvey.pdf"
EXPECTED = ["Yes", "No", "NA", "No", "No", "Yes", "Yes", "No", "Yes", "No", "NA", "No", "NA",
            "NA", "NA"]  # fmt: skip


@functools.cache
def _original() -> ExtractedPaper:
    return extract_paper(PAPER.read_bytes(), PAPER.name)


def _same_as_original(paper: ExtractedPaper) -> None:
    assert [a.answer for a in paper.answers] == EXPECTED
    for got, want in zip(paper.answers, _original().answers, strict=True):
        assert got.status == "found", (got.number, got.problem)
        assert got.justification == want.justification, got.number


def _raw_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


@pytest.mark.parametrize(
    ("where", "pad", "glued"),
    [("end", 0, r"NeurIPS Paper Checklist\d+"), ("start", 3, r"\d{3} NeurIPS Paper Checklist")],
)
def test_review_mode_line_numbers_in_the_real_pdf(where: str, pad: int, glued: str) -> None:
    data = review_pdf(PAPER.name, where, pad)
    raw = _raw_text(data)
    assert re.search(glued, raw)  # the layout of the issue, e.g. "NeurIPS Paper Checklist151"
    if where == "end":
        assert re.search(r"Answer: \[Yes\]\d+", raw)
    paper = extract_paper(data, "review.pdf")
    _same_as_original(paper)
    assert paper.notes and paper.notes[0].startswith("review-mode line numbers removed")
    assert not re.search(r"[a-z.]\d{2,}\b", paper.body[:3000]), paper.body[:3000]
    assert [a.page for a in paper.answers] == [a.page for a in _original().answers]
    assert paper.answers[0].page == 5 and paper.pages == 10


RESPELLED = {1: "[Yes] ", 3: "[N/A]", 6: "Yes", 11: "N/A", 13: "[NA]", 14: "NA", 2: "[No]"}


def test_two_columns_header_ligatures_hyphenation_and_answer_spellings() -> None:
    lines = checklist_lines(PAPER, 46, answers=RESPELLED)
    layout = Layout(columns=2, lines_per_column=48, header="Under review at NeurIPS 2024")
    data = typeset(lines, layout)
    raw = _raw_text(data)
    assert "ﬁ" in raw and re.search(r"[a-z]-\n\d+ [a-z]", raw)  # ligatures and hyphenation
    # Left-column numbers come before their lines, right-column ones after them.
    assert re.search(r"^\d+ Answer: ", raw, re.M) and re.search(r"^Answer: .* \d+$", raw, re.M)
    paper = extract_paper(data, "two-column.pdf")
    _same_as_original(paper)
    assert paper.answers[0].raw_answer == "[Yes]" and paper.answers[10].raw_answer == "N/A"
    # Question 2's justification runs onto the next page, past the page number and header.
    q2_page = PdfReader(io.BytesIO(data)).pages[(paper.answers[1].page or 1) - 1].extract_text()
    assert re.search(r"Justiﬁcation: in the conclusion.*-\n\d+\s*$", q2_page)
    assert "Under review" not in paper.answers[1].justification
    assert any("running headers" in note for note in paper.notes)
    assert "Under review" not in paper.body and "the official challenges" in paper.body


def test_appendix_after_the_checklist_is_body_not_justification() -> None:
    lines = checklist_lines(PAPER, 90, answers={}, appendix=True)
    data = typeset(lines, Layout(numbers="end", lines_per_column=50))
    paper = extract_paper(data, "appendix-last.pdf")
    _same_as_original(paper)
    assert "per-prompt scores of every reviewer baseline" in paper.body
    assert "per-prompt" not in paper.answers[14].justification
    assert any("after the checklist" in note for note in paper.notes)


def test_missing_questions_are_reported_by_number_and_title_not_fatal() -> None:
    lines = drop_questions(checklist_lines(PAPER, 90, answers={}), {9})
    data = typeset(lines, Layout(numbers="end"))
    paper = extract_paper(data, "no-q9.pdf", strict=False)
    assert [a.number for a in paper.missing] == [9]
    assert paper.answers[8].title == "Code of Ethics" and paper.answers[8].status == "missing"
    assert sum(a.status == "found" for a in paper.answers) == 14
    assert paper.answers[9].answer == "No"  # question 10 is not swallowed by question 8
    assert paper.answers[7].justification == _original().answers[7].justification
    data_json = paper.as_json()
    assert data_json["complete"] is False
    assert data_json["missing"] == [{"number": 9, "title": "Code of Ethics"}]
    assert len(data_json["questions"]) == 15 and len(data_json["answers"]) == 14  # type: ignore[arg-type]
    with pytest.raises(ExtractionError, match=r"Question 9 \(Code of Ethics\): not found"):
        extract_paper(data, "no-q9.pdf")
    two = typeset(drop_questions(checklist_lines(PAPER, 90, answers={}), {9, 12}), Layout())
    with pytest.raises(ExtractionError) as info:
        extract_paper(two, "no-q9-q12.pdf")
    assert info.value.questions == (9, 12)
    message = str(info.value)
    assert "2 of 15 questions" in message
    assert "Question 12 (Licenses for Existing Assets)" in message


def test_unrecognized_answer_is_a_finding_in_previews_and_an_error_for_submissions() -> None:
    data = typeset(checklist_lines(PAPER, 90, answers={7: "[Perhaps]"}), Layout(numbers=None))
    paper = extract_paper(data, "perhaps.pdf", strict=False)
    q7 = paper.answers[6]
    assert (q7.status, q7.raw_answer) == ("unrecognized", "[Perhaps]")
    assert q7.as_json()["answer"] is None and "not Yes, No, NA or TODO" in q7.problem
    with pytest.raises(ExtractionError) as info:
        extract_paper(data, "perhaps.pdf")
    assert info.value.question == 7


def test_justifications_written_without_their_label_are_read() -> None:
    # A real paper not bundled here writes the justification with no "Justification:" label:
    # the answer line, then the sentence, then "Guidelines:" (issue 26).
    label = re.compile(r"^Justi(?:ﬁ|fi)cation:\s*")
    lines = [label.sub("", line) for line in checklist_lines(PAPER, 90, answers={})]
    lines = [line for line in lines if line]
    data = typeset(lines, Layout(numbers="end"))
    assert "Justification:" not in _raw_text(data) and "Justiﬁcation:" not in _raw_text(data)
    paper = extract_paper(data, "unlabelled.pdf")
    _same_as_original(paper)
    assert all(a.justification for a in paper.answers)
