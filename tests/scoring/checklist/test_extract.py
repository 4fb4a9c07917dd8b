from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

import pytest

from scoring.checklist.extract import ExtractedPaper, ExtractionError, extract_paper

SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"

EXPECTED = {
    "AutoSurvey.pdf": ["Yes", "No", "NA", "No", "No", "Yes", "Yes", "No", "Yes", "No", "NA",
                       "No", "NA", "NA", "NA"],
    "MetaAlbum.pdf": ["Yes", "Yes", "NA", "Yes", "Yes", "Yes", "Yes", "Yes", "Yes", "Yes", "Yes",
                      "Yes", "Yes", "NA", "NA"],
}  # fmt: skip


@functools.cache
def _pdf(name: str) -> ExtractedPaper:
    return extract_paper((SAMPLE / "papers" / name).read_bytes(), name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_pdfs_yield_all_fifteen_answers_and_justifications(name: str) -> None:
    paper = _pdf(name)
    assert [a.number for a in paper.answers] == list(range(1, 16))
    assert [a.answer for a in paper.answers] == EXPECTED[name]
    for a in paper.answers:
        assert len(a.justification) > 20, (a.number, a.justification)
        assert "Guidelines" not in a.justification
        # Page numbers and line breaks of the PDF layout are gone.
        assert "\n" not in a.justification
    assert paper.source_format == "pdf"


def test_pdf_justification_spanning_a_page_break_and_hyphenation() -> None:
    paper = _pdf("MetaAlbum.pdf")
    q6 = paper.answers[5].justification
    assert "Section 3.2: Experiments" in q6  # "Experi-\nments" joined again
    # "[N/A]" as printed, normalized to NA.
    assert paper.answers[2].raw_answer == "[N/A]"
    assert paper.answers[2].answer == "NA"


def test_pdf_body_is_capped_and_says_so() -> None:
    data = (SAMPLE / "papers" / "MetaAlbum.pdf").read_bytes()
    paper = extract_paper(data, "MetaAlbum.pdf", word_cap=500)
    assert paper.body_truncated is True
    assert paper.body_words == 500
    assert len(paper.body.split()) == 500
    full = _pdf("AutoSurvey.pdf")
    assert full.body_truncated is False
    assert "NeurIPS Paper Checklist" not in full.body
    assert "Contrastive evaluation" in full.body


def test_latex_demo_paper() -> None:
    paper = extract_paper((SAMPLE / "demo" / "genuine.tex").read_bytes(), "genuine.tex")
    assert len(paper.answers) == 15
    assert paper.answers[1].answer == "No"
    assert paper.answers[2].answer == "NA"
    # \ref resolved against the body's section numbering.
    assert paper.answers[6].justification.endswith("reported in Section 4.2.")
    assert "4.2 AI-Reviewer baselines" in paper.body
    assert paper.title.startswith("Auto-survey Challenge")
    assert paper.source_format == "tex"


def _tex(items: str, body: str = "\\section{Intro}\nText.") -> str:
    return (
        "\\documentclass{article}\n\\begin{document}\n" + body + "\n"
        "\\section*{NeurIPS Paper Checklist}\n\\begin{enumerate}\n" + items + "\\end{enumerate}\n"
        "\\end{document}\n"
    )


def _item(title: str, answer: str, justification: str) -> str:
    return (
        f"\\item {{\\bf {title}}}\n  \\item[] Question: Q?\n  \\item[] Answer: {answer} % note\n"
        f"  \\item[] Justification: {justification}\n  \\item[] Guidelines:\n"
        "  \\begin{itemize}\n  \\item The answer NA means ...\n  \\end{itemize}\n"
    )


def test_latex_macros_todo_and_na_spellings() -> None:
    items = _item("Claims", "\\answerYes{}", "See the abstract.")
    items += _item("Limitations", "\\answerTODO{}", "\\justificationTODO{}")
    items += _item("Theory", "[N/A]", "No theory.")
    for n in range(4, 16):
        items += _item(f"Q{n}", "\\answerNo{}", f"Reason {n}.")
    paper = extract_paper(_tex(items).encode(), "paper.tex")
    assert [a.answer for a in paper.answers[:4]] == ["Yes", "TODO", "NA", "No"]
    assert paper.answers[1].justification == ""
    assert paper.answers[0].justification == "See the abstract."
    assert paper.answers[14].justification == "Reason 15."


def test_latex_error_names_the_question() -> None:
    items = "".join(_item(f"Q{n}", "\\answerYes{}", "ok") for n in range(1, 7))
    items += _item("Statistical", "[Perhaps]", "hmm")
    items += "".join(_item(f"Q{n}", "\\answerYes{}", "ok") for n in range(8, 16))
    with pytest.raises(ExtractionError) as info:
        extract_paper(_tex(items).encode(), "paper.tex")
    assert info.value.question == 7
    assert "Question 7 (Experiment Statistical Significance)" in str(info.value)
    assert "paper.tex" in str(info.value)


def test_missing_checklist_is_a_clear_error() -> None:
    with pytest.raises(ExtractionError, match="no 'NeurIPS Paper Checklist' section"):
        extract_paper(b"\\documentclass{article}\\begin{document}Hi\\end{document}", "x.tex")


def test_tex_with_input_suggests_a_zip() -> None:
    tex = "\\documentclass{article}\\begin{document}Hi \\input{checklist}\\end{document}"
    with pytest.raises(ExtractionError, match=r"\.zip"):
        extract_paper(tex.encode(), "main.tex")


def test_zip_with_main_file_and_input() -> None:
    items = "".join(_item(f"Q{n}", "\\answerNA{}", f"Not applicable {n}.") for n in range(1, 16))
    checklist = "\\section*{NeurIPS Paper Checklist}\n\\begin{enumerate}\n" + items
    checklist += "\\end{enumerate}\n"
    main = "\\documentclass{article}\n\\begin{document}\n\\section{Intro}\nBody text.\n"
    main += "\\input{sections/checklist}\n\\end{document}\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("paper/main.tex", main)
        z.writestr("paper/sections/checklist.tex", checklist)
        z.writestr("paper/figure.png", b"\x89PNG")
    paper = extract_paper(buf.getvalue(), "sources.zip")
    assert paper.source_format == "zip"
    assert [a.answer for a in paper.answers] == ["NA"] * 15
    assert paper.answers[9].justification == "Not applicable 10."
    assert "1 Intro" in paper.body


def test_unsupported_extension_and_fake_pdf() -> None:
    with pytest.raises(ExtractionError, match=r"unsupported file type '\.docx'"):
        extract_paper(b"...", "paper.docx")
    with pytest.raises(ExtractionError, match="not a PDF"):
        extract_paper(b"hello", "paper.pdf")
    with pytest.raises(ExtractionError, match="zip"):
        extract_paper(b"hello", "paper.zip")


def test_pdf_text_question_missing_is_named() -> None:
    from scoring.checklist.extract import parse_checklist_text

    text = "NeurIPS Paper Checklist\n" + "".join(
        f"{n}. Title\nAnswer: [Yes]\nJustification: j{n}\nGuidelines:\n• g\n"
        for n in range(1, 16)
        if n != 9
    )
    with pytest.raises(ExtractionError, match=r"Question 9 \(Code of Ethics\): not found"):
        parse_checklist_text(text)
