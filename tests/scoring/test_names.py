"""One skeleton decides whether two public names are the same (issue 11 item 8)."""

from __future__ import annotations

import pytest

from scoring.names import name_skeleton, same_name


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("b\u0430seline", "baseline"),  # Cyrillic a
        ("g\u0440t-4", "gpt-4"),  # Cyrillic p
        ("GPT\u20104", "gpt-4"),  # hyphen U+2010
        ("Deceivers\u200b", "Deceivers"),  # zero-width space
        ("D\u0435ceivers", "Deceivers"),  # Cyrillic e
        ("\uff24eceivers", "Deceivers"),  # full-width D (NFKC)
        ("Team  \u00a0A", "team a"),  # runs of (non-breaking) spaces
        ("ba\u200dse\u2060line\ufe0f", "baseline"),  # joiners and a variation selector
    ],
)
def test_look_alikes_share_a_skeleton(a: str, b: str) -> None:
    assert a != b
    assert same_name(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("baseline", "baseline-2"), ("gpt-4", "gpt-40"), ("Deceivers", "Receivers"), ("a", "")],
)
def test_different_names_stay_different(a: str, b: str) -> None:
    assert name_skeleton(a) != name_skeleton(b)


def test_skeleton_is_stable() -> None:
    name = "D\u0435ceivers\u200b"
    assert name_skeleton(name_skeleton(name)) == name_skeleton(name)
