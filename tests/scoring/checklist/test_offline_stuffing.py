"""The offline checklist judge against gaming: keyword stuffing must not raise C by more than
one question, and NA must not be rewarded on papers that plainly report experiments."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from scoring.checklist.evidence import Reading, find_section, is_stuffed
from scoring.checklist.extract import extract_paper
from scoring.checklist.judges import (
    TOPIC_TERMS,
    TOPICS,
    ChecklistItem,
    ChecklistVerdict,
    OfflineChecklistJudge,
)
from scoring.checklist.questions import QUESTION_NUMBERS, QUESTION_TITLES

SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"
PAPERS = ("papers/AutoSurvey.pdf", "papers/MetaAlbum.pdf", "demo/genuine.tex")

# A paper with nothing on any checklist topic.
FILLER = """Abstract
We describe a system for sorting objects. The system is simple and it works well on the tasks
we looked at.

1 Introduction
Sorting is an old problem. In this paper we look at it again from a new angle and describe
what we did.

2 Method
The method places each object in a bucket and then merges the buckets in order. It is easy
to follow for anyone who has sorted things by hand.

3 Discussion
We think that the approach is useful for many people who need to sort things in their work.
"""


def stuffing_words(count: int = 134) -> list[str]:
    """The attack: the judge's own topic terms, in its order, repeated up to ``count`` words."""
    vocabulary = " ".join(dict.fromkeys(t for terms in TOPIC_TERMS.values() for t in terms))
    words = vocabulary.split()
    return (words * (count // len(words) + 1))[:count]


def _sentence(words: list[str]) -> str:
    text = " ".join(words)
    return text[:1].upper() + text[1:] + "."


def stuffing(variant: str) -> str:
    words = stuffing_words()
    chunks = [words[i : i + 5] for i in range(0, len(words), 5)]
    if variant == "paragraph":
        return " ".join(words)
    if variant == "sentences":
        return " ".join(_sentence(c) for c in chunks)
    if variant == "paragraphs":
        return "\n\n".join(_sentence(c) for c in chunks)
    if variant == "figures":  # a number after every third word, as settings would carry
        return " ".join(w + (f" {i}" if i % 3 == 0 else "") for i, w in enumerate(words))
    if variant == "glued":  # function words between the keywords
        return " ".join(w + (" of the" if i % 2 else " and") for i, w in enumerate(words))
    raise ValueError(variant)


VARIANTS = ("paragraph", "sentences", "paragraphs", "figures", "glued")


@cache
def paper(name: str) -> tuple[str, dict[int, tuple[str, str]]]:
    """(body text, the authors' answers) of a bundled paper."""
    extracted = extract_paper((SAMPLE / name).read_bytes(), Path(name).name)
    return extracted.body, {a.number: (a.answer, a.justification) for a in extracted.answers}


def verdicts(text: str, answers: dict[int, tuple[str, str]]) -> dict[int, ChecklistVerdict]:
    judge = OfflineChecklistJudge()
    return {
        n: judge.decide(
            ChecklistItem("G", n, QUESTION_TITLES[n], "?", "", *answers[n], paper_text=text)
        )
        for n in QUESTION_NUMBERS
    }


def correct(text: str, answers: dict[int, tuple[str, str]]) -> int:
    return sum(v.correct for v in verdicts(text, answers).values())


def all_yes(justification: str | None = None) -> dict[int, tuple[str, str]]:
    return {
        n: ("Yes", justification or f"The paper covers {QUESTION_TITLES[n].lower()}.")
        for n in QUESTION_NUMBERS
    }


ALL_NA = {n: ("NA", "This question does not apply to our paper.") for n in QUESTION_NUMBERS}


def test_the_stuffing_paragraph_is_the_attack_of_the_issue() -> None:
    words = stuffing_words()
    assert len(words) == 134
    text = " ".join(words)
    assert all(any(t in text for t in terms) for terms in TOPIC_TERMS.values())


@pytest.mark.parametrize("variant", VARIANTS)
def test_stuffing_a_filler_paper_gains_at_most_one_question(variant: str) -> None:
    clean = correct(FILLER, all_yes())
    assert clean <= 2  # Claims and Code of Ethics need only a justification
    stuffed = correct(f"{FILLER}\n{stuffing(variant)}\n", all_yes())
    assert stuffed - clean <= 1, f"{variant}: {clean} -> {stuffed} of 15"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", PAPERS)
def test_stuffing_a_real_paper_gains_at_most_one_question(name: str, variant: str) -> None:
    body, authors = paper(name)
    for answers in (all_yes(), authors):
        clean = correct(body, answers)
        stuffed = correct(f"{body}\n\n{stuffing(variant)}\n", answers)
        assert stuffed - clean <= 1, f"{name}, {variant}: {clean} -> {stuffed} of 15"


def test_stuffing_the_cited_section_gains_nothing() -> None:
    text = f"{FILLER}\n4 Additional details\n{stuffing('paragraph')}\n"
    answers = all_yes("All of this is given in Section 4.")
    found = verdicts(text, answers)
    assert sum(v.correct for v in found.values()) <= 2
    assert "keyword-stuffed" in found[7].feedback and "4 Additional details" in found[7].feedback


@pytest.mark.parametrize("name", PAPERS)
def test_all_na_is_not_rewarded_on_a_paper_with_experiments(name: str) -> None:
    body, authors = paper(name)
    found = verdicts(body, ALL_NA)
    # Claims and ethics apply to every paper; limitations, settings, code, error bars,
    # compute and the licenses of used assets apply to every paper with experiments.
    for n in (1, 2, 4, 5, 6, 7, 8, 9, 12):
        assert not found[n].correct, (n, found[n].feedback)
    assert "reports experiments" in found[6].feedback
    score = sum(v.correct for v in found.values())
    authors_na = sum(answer == "NA" for answer, _ in authors.values())
    assert score <= min(6, authors_na + 1)
    assert score < correct(body, authors)


def test_na_stays_right_where_the_paper_has_no_experiments() -> None:
    found = verdicts(FILLER, ALL_NA)
    assert all(found[n].correct for n in (3, 4, 5, 6, 7, 8, 12))
    assert not found[1].correct and not found[9].correct


PAPER = """Abstract
We propose a method.

1 Introduction
Our contribution is a new method for ranking.

3 Experiments
3.2 Setup
We train with learning rate 0.1 and batch size 32; the optimizer is Adam.
Results are mean ± standard deviation over 5 seeds; error bars show the standard error.
We used GPUs for training.

6 Limitations
The method assumes clean labels, and a limitation is its cost on long lists.

7 Conclusion
Ranking is solved for short lists.
"""


def decide(number: int, justification: str, text: str = PAPER) -> ChecklistVerdict:
    return verdicts(text, {n: ("Yes", justification) for n in QUESTION_NUMBERS})[number]


def test_yes_is_checked_where_the_justification_points() -> None:
    assert decide(6, "The settings are in Section 3.2.").correct
    wrong_place = decide(6, "The settings are in Section 6.")
    assert not wrong_place.correct and "6 Limitations" in wrong_place.feedback
    assert decide(2, "See the Limitations section.").correct
    assert not decide(2, "This is discussed in the Conclusion section.").correct
    assert decide(7, "Error bars show the standard error in Section 3.").correct


def test_figures_the_justification_states_must_be_in_the_paper() -> None:
    assert decide(7, "Mean and standard deviation over 5 seeds.").correct
    made_up = decide(7, "Mean and standard deviation over 12 seeds.")
    assert not made_up.correct and "12" in made_up.feedback


def test_settings_and_compute_need_figures() -> None:
    assert not decide(8, "We report the compute we used.").correct  # "We used GPUs" only
    with_figures = PAPER.replace("We used GPUs", "We used 8 A100 GPUs for 12 hours")
    assert decide(8, "8 A100 GPUs for 12 hours.", with_figures).correct


@pytest.mark.parametrize("name", PAPERS)
def test_no_sentence_of_a_real_paper_is_taken_for_stuffing(name: str) -> None:
    body, _ = paper(name)
    reading = Reading.of(body, TOPICS)
    assert reading.stuffed == 0 and len(reading.kept) > 10


def test_stuffing_detector_on_single_sentences() -> None:
    assert is_stuffed(" ".join(stuffing_words(40)), TOPICS)
    assert is_stuffed("Error bar standard deviation confidence interval std.", TOPICS)
    for genuine in (
        "Hyperparameters: learning rate 0.1, batch size 32, 100 epochs, Adam optimizer.",
        "Results are mean ± standard deviation over 5 seeds; error bars show the standard error.",
        "Code is available at https://github.com/example/project under the MIT license.",
        "We assume that the labels are clean, which is a limitation of this work.",
    ):
        assert not is_stuffed(genuine, TOPICS), genuine


def test_a_cited_section_spans_its_subsections_only() -> None:
    body, _ = paper("demo/genuine.tex")
    section = find_section(body, "4")
    assert section is not None
    inside = body[section.start : section.end]
    assert "4.1 AI-Author baselines" in inside and "4.2 AI-Reviewer baselines" in inside
    assert "5 Conclusion" not in inside
