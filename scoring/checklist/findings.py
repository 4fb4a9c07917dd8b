"""What extraction found in a paper: one finding per checklist question, and the paper.

A real submission can lose a question to its layout (a heading broken by a page break, an
answer the PDF's text layer garbled). Rather than refusing the whole paper at the first such
question, extraction records per question whether it was found, what it read and on which
page; callers that need all 15 answers (a submission) call :meth:`ExtractedPaper.require_complete`,
which names every missing question, and the previews show the findings as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from scoring.checklist.normalize import Answer
from scoring.checklist.questions import QUESTION_TITLES, label

CHECKLIST_HEADING = "NeurIPS Paper Checklist"
Status = Literal["found", "missing", "unrecognized"]


class ExtractionError(ValueError):
    """The checklist could not be read; ``question`` names the question when one failed,
    ``questions`` every question concerned (several may be missing at once)."""

    def __init__(
        self,
        message: str,
        *,
        question: int | None = None,
        file: str = "",
        questions: tuple[int, ...] = (),
    ) -> None:
        self.question = question
        self.questions = questions or ((question,) if question else ())
        self.file = file
        prefix = f"{file}: " if file else ""
        where = f"{label(question)}: " if question else ""
        super().__init__(f"{prefix}{where}{message}")
        self.detail = message


@dataclass(frozen=True)
class ExtractedAnswer:
    """One checklist question as read from the paper.

    ``status`` is ``missing`` when the question's heading is not in the checklist (``answer``
    is then TODO and ``problem`` says why) and ``unrecognized`` when its answer is neither Yes,
    No, NA nor TODO (``raw_answer`` keeps it as printed). ``page`` is the 1-based PDF page of
    the question's heading (None for LaTeX sources, which have no pages). ``problem`` may also
    be set on a found answer, e.g. when no "Answer:" line was read and TODO was assumed.
    """

    number: int
    title: str
    answer: Answer
    raw_answer: str
    justification: str
    page: int | None = None
    status: Status = "found"
    problem: str = ""

    @property
    def found(self) -> bool:
        return self.status != "missing"

    def as_json(self) -> dict[str, object]:
        readable = self.status == "found"
        return {
            "number": self.number,
            "title": self.title,
            "status": self.status,
            "found": self.found,
            "answer": self.answer if readable else None,
            "raw_answer": self.raw_answer,
            "justification": self.justification,
            "page": self.page,
            "problem": self.problem,
        }


def missing_answer(number: int, problem: str = "") -> ExtractedAnswer:
    """The finding for a question whose heading is not in the checklist."""
    return ExtractedAnswer(
        number=number,
        title=QUESTION_TITLES[number],
        answer="TODO",
        raw_answer="",
        justification="",
        status="missing",
        problem=problem or "not found in the checklist",
    )


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5``: short enough for an error message."""
    parts: list[str] = []
    for n in sorted(numbers):
        if parts and re.fullmatch(rf"(\d+-)?{n - 1}", parts[-1]):
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts) or "none"


@dataclass
class ExtractedPaper:
    """The checklist findings (one per question, in order) and the body the judge reads."""

    answers: list[ExtractedAnswer]
    body: str
    body_words: int
    body_truncated: bool
    source_format: str  # pdf | tex | zip
    title: str = ""
    notes: list[str] = field(default_factory=list)
    pages: int | None = None

    @property
    def missing(self) -> list[ExtractedAnswer]:
        return [a for a in self.answers if not a.found]

    @property
    def unrecognized(self) -> list[ExtractedAnswer]:
        return [a for a in self.answers if a.status == "unrecognized"]

    @property
    def complete(self) -> bool:
        return all(a.status == "found" for a in self.answers)

    def require_complete(self, *, file: str = "") -> None:
        """Raise ExtractionError naming every missing question, or the first answer that is not
        Yes, No, NA or TODO: a submission is scored on all 15 questions."""
        missing = [a.number for a in self.missing]
        if len(missing) == 1:
            found = [a.number for a in self.answers if a.found]
            raise ExtractionError(
                f"not found in the checklist (questions found: {_ranges(found)})",
                question=missing[0],
                file=file,
            )
        if missing:
            named = "; ".join(label(n) for n in missing)
            raise ExtractionError(
                f"{len(missing)} of {len(self.answers)} questions not found in the checklist: "
                f"{named}",
                file=file,
                questions=tuple(missing),
            )
        for a in self.unrecognized:
            raise ExtractionError(a.problem, question=a.number, file=file)

    def as_json(self) -> dict[str, object]:
        """The shape of ``extract_checklist --format json`` and ``POST /api/checklist/extract/``.

        ``answers`` keeps its original shape (the readable answers only); ``questions`` has
        one finding per question, missing ones included.
        """
        return {
            "answers": [
                {
                    "number": a.number,
                    "title": a.title,
                    "answer": a.answer,
                    "justification": a.justification,
                }
                for a in self.answers
                if a.status == "found"
            ],
            "questions": [a.as_json() for a in self.answers],
            "complete": self.complete,
            "found": sum(1 for a in self.answers if a.found),
            "missing": [{"number": a.number, "title": a.title} for a in self.missing],
            "body_words": self.body_words,
            "body_truncated": self.body_truncated,
            "title": self.title,
            "source_format": self.source_format,
            "pages": self.pages,
            "notes": list(self.notes),
        }


def cap_words(text: str, cap: int) -> tuple[str, int, bool]:
    """Keep the first ``cap`` words (whitespace kept as is); returns text, words, truncated."""
    words = list(re.finditer(r"\S+", text))
    if len(words) <= cap:
        return text.strip(), len(words), False
    end = words[cap - 1].end()
    return text[:end].strip(), cap, True
