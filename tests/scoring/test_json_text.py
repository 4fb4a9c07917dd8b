"""JSON from participants: an integer over Python's digit limit is a JSON error that says the
number is too large, not a ValueError that names ``sys.set_int_max_str_digits()``."""

from __future__ import annotations

import json

import pytest

from scoring.json_text import NumberTooLarge, json_loads


def test_a_huge_integer_is_a_decode_error_located_and_plain() -> None:
    text = '{"a": 1,\n "b": ' + "7" * 5000 + "}"
    with pytest.raises(json.JSONDecodeError) as caught:
        json_loads(text)
    assert isinstance(caught.value, NumberTooLarge)
    assert caught.value.msg == "a number is too large (more than 4300 digits)"
    assert (caught.value.lineno, caught.value.colno) == (2, 7)
    assert "sys." not in str(caught.value)


def test_other_input_is_decoded_or_refused_as_json_does() -> None:
    assert json_loads(b'{"n": ' + b"1" * 4300 + b"}")["n"] == int("1" * 4300)
    with pytest.raises(json.JSONDecodeError) as caught:
        json_loads("{nope")
    assert not isinstance(caught.value, NumberTooLarge)
    with pytest.raises(UnicodeDecodeError):
        json_loads(b'{"a": "\xff\xfe\xfd"}' + b" " * 10)
