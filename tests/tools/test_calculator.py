"""The calculator reads the everyday forms a small model copies from the question."""

from __future__ import annotations

import pytest

from thinkloop import Agent, ScriptedModel
from thinkloop.models.scripted import call, reply
from thinkloop.tools.builtin.calculator import calculator


@pytest.mark.parametrize(("expression", "value"), [
    ("15% of 240", "36"), ("20 percent of 80", "16"), ("the square root of 144", "12"),
    ("7 squared", "49"), ("3 x 60", "180"), ("12*7?", "84"), ("10 % 3", "1"),
    ("0.15*240", "36"), ("2 cubed", "8"), ("7% of 300", "21"),
    ("2.5 kilometers to meters", "2500"), ("How many minutes are in 3 hours", "180"),
    ("90 minutes in hours", "1.5"), ("1 mile to km", "1.609344"),
])
async def test_everyday_forms_are_arithmetic(expression: str, value: str) -> None:
    model = ScriptedModel([reply("", call("calculator", expression=expression)), "done"])
    result = await Agent(model, tools=[calculator]).run("compute")
    assert result.steps[0].results[0].content == value


async def test_words_are_still_an_error_the_model_reads() -> None:
    model = ScriptedModel([reply("", call("calculator", expression="what is it")), "sorry"])
    result = await Agent(model, tools=[calculator]).run("compute")
    assert result.steps[0].results[0].is_error


async def test_a_conversion_between_two_kinds_of_unit_is_an_error() -> None:
    model = ScriptedModel([reply("", call("calculator", expression="5 meters to seconds")),
                           "sorry"])
    result = await Agent(model, tools=[calculator]).run("compute")
    assert result.steps[0].results[0].is_error
