"""Everyday arithmetic in words is found in a sentence and read as the expression it means."""

from __future__ import annotations

import pytest

from thinkloop.arithmetic import phrases_in, plain


@pytest.mark.parametrize(("text", "found"), [
    ("What is 15% of 240?", ["15% of 240"]),
    ("Calculate 20 percent of 80.", ["20 percent of 80"]),
    ("What is the square root of 144?", ["the square root of 144"]),
    ("What is 7 squared, and 2 cubed?", ["7 squared", "2 cubed"]),
    ("Convert 2.5 kilometers to meters.", ["2.5 kilometers to meters"]),
    ("How many seconds are there in 2 minutes?", ["How many seconds are there in 2 minutes"]),
    ("how many days in a week", ["how many days in a week"]),
    ("Convert 5 m to seconds.", []),  # two kinds of unit: no conversion
    ("I swam 3 m in the pool", []),
    ("What is 12*7?", []),
    ("Read number.txt, then multiply that number by 3.", []),
])
def test_phrases_are_found_in_a_sentence(text: str, found: list[str]) -> None:
    assert phrases_in(text) == found


@pytest.mark.parametrize(("phrase", "value"), [
    ("7% of 300", 21), ("the square root of 144", 12), ("2 cubed", 8),
    ("2.5 km to m", 2500), ("120 minutes in hours", 2), ("how many minutes in 3 hours", 180),
    ("3 feet in inches", 36), ("2 kg to g", 2000), ("1500 ml in liters", 1.5),
])
def test_each_phrase_reads_as_its_arithmetic(phrase: str, value: float) -> None:
    import math

    expression = plain(phrase)
    assert eval(expression, {"__builtins__": {}, "sqrt": math.sqrt}) == pytest.approx(value)


def test_anything_else_is_left_as_it_was() -> None:
    assert plain("12*7?") == "12*7"
    assert plain("5 m to seconds") == "5 m to seconds"
    assert plain("3 x 60") == "3*60"
