from __future__ import annotations

import pytest

from scoring.checklist.normalize import AnswerNotRecognized, normalize_answer
from scoring.checklist.scores import (
    PaperAssessment,
    checklist_scores,
    correctness,
    robustness,
)

NUMS = (1, 2, 3, 4)  # a 4-question checklist keeps the hand computations readable


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Yes", "Yes"),
        ("[Yes]", "Yes"),
        ("yes", "Yes"),
        (" [ yes ] ", "Yes"),
        ("No", "No"),
        ("[No]", "No"),
        ("NA", "NA"),
        ("N/A", "NA"),
        ("[NA]", "NA"),
        ("[N/A]", "NA"),
        ("Not Applicable", "NA"),
        ("not applicable", "NA"),
        ("TODO", "TODO"),
        ("[TODO]", "TODO"),
        ("", "TODO"),
        (None, "TODO"),
        ("\\answerNA{}", "NA"),
    ],
)
def test_normalize_answer(raw: str | None, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_unknown_answer_is_refused() -> None:
    with pytest.raises(AnswerNotRecognized, match="Maybe"):
        normalize_answer("[Maybe]")


def test_c_counts_todo_as_zero_over_all_questions() -> None:
    # Q1 correct, Q2 wrong, Q3 TODO (a c=1 given for it must not count), Q4 correct.
    paper = PaperAssessment(
        answers={1: "Yes", 2: "No", 3: "TODO", 4: "N/A"}, correct={1: 1, 2: 0, 3: 1, 4: 1}
    )
    assert correctness(paper, NUMS) == pytest.approx(2 / 4)


def test_missing_question_is_todo() -> None:
    paper = PaperAssessment(answers={1: "Yes"}, correct={1: 1})
    assert correctness(paper, NUMS) == 0.25


def test_r_compares_normalized_answers_and_skips_todo_truth() -> None:
    # T: Q1 Yes, Q2 NA, Q3 No, Q4 TODO (excluded).
    # A: Q1 [Yes] -> g=1; Q2 N/A equals NA -> g=1 (raw comparison would say 0);
    #    Q3 Yes vs No -> g=0.
    # c(A): Q1 1 (=g), Q2 0 (!=g), Q3 0 (=g)  -> R = 2/3.
    a = PaperAssessment(
        answers={1: "[Yes]", 2: "N/A", 3: "Yes", 4: "No"}, correct={1: 1, 2: 0, 3: 0, 4: 1}
    )
    t = PaperAssessment(answers={1: "Yes", 2: "NA", 3: "No", 4: "TODO"}, correct={})
    assert robustness(a, t, NUMS) == pytest.approx(2 / 3)


def test_r_with_todo_adversarial_answer() -> None:
    # A's TODO has c=0; T says No -> g=0 -> c equals g: counts as agreement.
    a = PaperAssessment(answers={1: "TODO", 2: "Yes"}, correct={2: 1})
    t = PaperAssessment(answers={1: "No", 2: "Yes"}, correct={1: 1, 2: 1})
    assert robustness(a, t, (1, 2)) == 1.0


def test_s_full_precision() -> None:
    g = PaperAssessment(
        answers={1: "Yes", 2: "No", 3: "NA", 4: "Yes"}, correct={1: 1, 2: 1, 3: 1, 4: 0}
    )
    a = PaperAssessment(
        answers={1: "Yes", 2: "Yes", 3: "Not Applicable", 4: "TODO"},
        correct={1: 1, 2: 1, 3: 0, 4: 1},
    )
    t = PaperAssessment(
        answers={1: "Yes", 2: "No", 3: "NA", 4: "No"}, correct={1: 1, 2: 1, 3: 1, 4: 1}
    )
    scores = checklist_scores(g, a, t, NUMS)
    # C_G = 3/4; C_A = (1+1+0+0)/4 = 1/2 (Q4 TODO); C_T = 1.
    # g: Q1 1, Q2 0, Q3 1 (NA == Not Applicable), Q4 0 (TODO != No).
    # c(A): 1, 1, 0, 0 -> equal to g on Q1 and Q4 -> R = 2/4.
    # S = 3/4 * 1/2 * (1 - 1/2) * 1 = 3/16.
    assert scores.c_g == 0.75
    assert scores.c_a == 0.5
    assert scores.c_t == 1.0
    assert scores.r == 0.5
    assert scores.s == 3 / 16
    assert scores.display() == {
        "c_g": "0.75",
        "c_a": "0.50",
        "c_t": "1.00",
        "r": "0.50",
        "s": "0.19",
    }


def test_s_keeps_precision_beyond_two_decimals() -> None:
    nums = (1, 2, 3)
    g = PaperAssessment(answers={1: "Yes", 2: "Yes", 3: "Yes"}, correct={1: 1, 2: 1, 3: 0})
    t = PaperAssessment(answers={1: "Yes", 2: "Yes", 3: "Yes"}, correct={1: 1, 2: 1, 3: 1})
    a = PaperAssessment(answers={1: "No", 2: "Yes", 3: "Yes"}, correct={1: 1, 2: 1, 3: 1})
    scores = checklist_scores(g, a, t, nums)
    # R: g = (0, 1, 1), c = (1, 1, 1) -> 2/3; S = 2/3 * 1 * 1/3 * 1 = 2/9.
    assert scores.s == pytest.approx(2 / 9, rel=1e-12)
    assert scores.s != round(scores.s, 2)


def test_genuine_only_defaults() -> None:
    g = PaperAssessment(
        answers={1: "Yes", 2: "NA", 3: "No", 4: "No"}, correct={1: 1, 2: 1, 3: 1, 4: 0}
    )
    scores = checklist_scores(g, numbers=NUMS)
    assert (scores.c_g, scores.c_a, scores.c_t, scores.r, scores.s) == (0.75, 0.0, 0.0, 1.0, 0.0)


def test_a_without_t_is_an_error() -> None:
    g = PaperAssessment(answers={}, correct={})
    with pytest.raises(ValueError, match="together"):
        checklist_scores(g, g, None)


def test_r_is_one_when_every_truth_answer_is_todo() -> None:
    a = PaperAssessment(answers={1: "Yes"}, correct={1: 0})
    t = PaperAssessment(answers={}, correct={})
    assert robustness(a, t, (1,)) == 1.0
