"""Finding the questions in plain checklist text when headings are reworded or lost."""

from __future__ import annotations

import json
import re
from pathlib import Path

from scoring.checklist.segment import checklist_start, read_checklist_text

TEMPLATE = json.loads(
    (
        Path(__file__).resolve().parents[3]
        / "benchmarks_app/sample_data/checklist/neurips2024_checklist.json"
    ).read_text()
)


def _checklist(heading: str = "NeurIPS Paper Checklist", answer: str = "[Yes]") -> str:
    """The 2024 checklist as plain text, with each question's own title from the template
    JSON (several differ from the printed ones, e.g. "Code and data accessibility")."""
    parts = [f"Body of the paper.\n{heading}"]
    for q in TEMPLATE:
        guideline = q["guidelines"].splitlines()[0]
        parts.append(
            f"{q['number']}. {q['title']}\nQuestion: {q['question']}\nAnswer: {answer}\n"
            f"Justification: Reason {q['number']}.\nGuidelines:\n• {guideline}"
        )
    return "\n".join(parts)


def _read(text: str) -> list:
    start = checklist_start(text)
    assert start is not None
    answers, _ = read_checklist_text(text[start:])
    return answers


def test_reworded_titles_are_found_by_number_and_question() -> None:
    answers = _read(_checklist())
    assert [a.status for a in answers] == ["found"] * 15
    assert [a.justification for a in answers] == [f"Reason {n}." for n in range(1, 16)]


def test_checklist_without_its_heading_is_found_from_its_first_question() -> None:
    text = _checklist(heading="Paper checklist")
    assert checklist_start(text) == text.index("1. Claims")
    assert len([a for a in _read(text) if a.found]) == 15


def test_question_whose_heading_is_lost_is_found_by_its_question_text() -> None:
    text = re.sub(r"(?m)^9\. NeurIPS code of ethics\n", "", _checklist())
    answers = _read(text)
    assert answers[8].status == "found" and answers[8].justification == "Reason 9."
    assert answers[7].justification == "Reason 8."


def test_answer_on_its_own_line_or_sharing_the_justification_line() -> None:
    text = _checklist(answer="\n[NA]")
    assert {a.answer for a in _read(text)} == {"NA"}
    one_line = _checklist().replace("Answer: [Yes]\nJustification:", "Answer: Yes Justification:")
    answers = _read(one_line)
    assert [a.raw_answer for a in answers] == ["Yes"] * 15
    assert answers[4].justification == "Reason 5."


def test_justification_heading_with_a_broken_fi_ligature() -> None:
    for spelling in ("Justiﬁcation", "Justi cation", "Justication", "Justi\ufffdcation"):
        text = _checklist().replace("Justification", spelling)
        assert _read(text)[2].justification == "Reason 3.", spelling
