"""Read assessments already made, in the challenge's CSV format.

Columns: ``Question, Question_Title, Answer, Justification, Guidelines, Review,
Correctness_Score``. ``Question`` is the question number or its text; ``Question_Title``
names it otherwise. ``Correctness_Score`` is the recorded c (0 or 1).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from scoring.checklist.normalize import Answer, AnswerNotRecognized, normalize_answer
from scoring.checklist.questions import N_QUESTIONS, QUESTION_TITLES

REQUIRED_COLUMNS = (
    "Question",
    "Question_Title",
    "Answer",
    "Justification",
    "Guidelines",
    "Review",
    "Correctness_Score",
)


class RecordedCsvError(ValueError):
    pass


@dataclass(frozen=True)
class RecordedRow:
    number: int
    title: str
    answer: Answer
    raw_answer: str
    justification: str
    review: str
    correct: int


def _norm_title(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


_TITLES = {_norm_title(t): n for n, t in QUESTION_TITLES.items()}


def _question_number(
    question: str, title: str, question_texts: dict[str, int], row_index: int
) -> int | None:
    m = re.fullmatch(r"\s*Q?\s*(\d{1,2})\.?\s*", question)
    if m and int(m.group(1)) in QUESTION_TITLES:
        return int(m.group(1))
    if _norm_title(title) in _TITLES:
        return _TITLES[_norm_title(title)]
    given = _norm_title(title)
    if len(given) >= 6:
        # Titles cut short or run on ("Code Of Ethics", "Licenses for existing assets").
        for known, number in _TITLES.items():
            if known.startswith(given) or given.startswith(known):
                return number
    key = _norm_title(question)
    if key in question_texts:
        return question_texts[key]
    return None


def parse_recorded_csv(
    data: bytes | str,
    *,
    file: str = "CSV",
    question_texts: dict[str, int] | None = None,
) -> list[RecordedRow]:
    """Parse and validate; errors name the file, the row and the column."""
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise RecordedCsvError(f"{file}: missing column(s) {', '.join(missing)}")
    texts = {_norm_title(k): v for k, v in (question_texts or {}).items()}
    rows: list[RecordedRow] = []
    seen: set[int] = set()
    raw_rows = [{(k or "").strip(): (v or "") for k, v in r.items()} for r in reader]
    for index, row in enumerate(raw_rows, start=1):
        line = f"{file}: row {index}"
        number = _question_number(row["Question"], row["Question_Title"], texts, index)
        if number is None and len(raw_rows) == N_QUESTIONS:
            number = index  # the challenge writes the 15 questions in order
        if number is None:
            raise RecordedCsvError(
                f"{line}: cannot tell which question {row['Question_Title'] or row['Question']!r}"
                " is"
            )
        if number in seen:
            raise RecordedCsvError(f"{line}: question {number} appears twice")
        seen.add(number)
        try:
            answer = normalize_answer(row["Answer"])
        except AnswerNotRecognized as exc:
            raise RecordedCsvError(f"{line} (question {number}), column Answer: {exc}") from exc
        score = row["Correctness_Score"].strip().lower()
        values = {"1": 1, "1.0": 1, "true": 1, "0": 0, "0.0": 0, "false": 0}
        if score not in values:
            raise RecordedCsvError(
                f"{line} (question {number}), column Correctness_Score: "
                f"{row['Correctness_Score']!r} is not 0 or 1"
            )
        rows.append(
            RecordedRow(
                number=number,
                title=QUESTION_TITLES[number],
                answer=answer,
                raw_answer=row["Answer"].strip()[:100],
                justification=row["Justification"].strip(),
                review=row["Review"].strip(),
                correct=values[score],
            )
        )
    if not rows:
        raise RecordedCsvError(f"{file}: no rows")
    return sorted(rows, key=lambda r: r.number)
