"""Labelled replies for the short-echo rule (``loop/notices.is_internal_echo``): True when the
reply is the engine's own words (a piece of one of its templates, or that piece's JSON
scaffold) rather than an answer, False for an answer.

Written before the rule, in two halves: ``TUNED`` was looked at while the rule was designed;
``HELD`` never was (the rule was fixed first, then scored on it once). Every echo is copied
from a real template (tests/loop/test_short_echo.py checks that). The first echo is the one
SmolLM2-135M gave (``thinkloop run``, the default local model), which ended a run
``completed``.
"""

from __future__ import annotations

TUNED: tuple[tuple[str, bool], ...] = (
    # echoes
    ("...Now reply with {", True),
    ('Now reply with {"answer": "..."}', True),
    ("reply with {", True),
    ("Now reply with", True),
    ("Make a different tool call.", True),
    ("or make a different tool call", True),
    ("Now make the tool call for the next step", True),
    ("giving the answer from this result", True),
    ('{"answer": "..."} saying what went wrong', True),
    ("Reply with one JSON object only", True),
    ("Stop exploring: make at most one more", True),
    ("[Round 2] Check the tool results", True),
    ("Do not call any more tools.", True),
    ("your final answer to the user written out in it", True),
    ("That call failed.", True),
    ("Give your best final answer now", True),
    ('with {"answer"', True),
    ("Now reply with {answer}", True),
    ("the question's own numbers and operators", True),
    ("in your own words", True),
    # answers
    ("84", False),
    ("Yes", False),
    ("No.", False),
    ("Now reply with the total: 12", False),
    ("The calculator says 84.", False),
    ("The answer is 42.", False),
    ("Paris", False),
    ("The tool call failed: the file does not exist.", False),
    ("I made a different tool call and it returned 7.", False),
    ("The next step is to restart the server.", False),
    ("Hi!", False),
    ("Done.", False),
    ("It answers the question: 5 apples.", False),
    ('The result is {"x": 1}', False),
    ('{"answer": "12"}', False),
    ("Sure, here you go: hello", False),
    ("Make a cup of tea.", False),
    ("Hello! How can I help you today?", False),
    ("The final answer is 7.", False),
    ("Now reply with 84", False),
)

HELD: tuple[tuple[str, bool], ...] = (
    # echoes
    ('Now reply with {"', True),
    ('reply with {"answer":', True),
    ("make a different tool call, or reply with", True),
    ("Send the tool call again", True),
    ("if that answers the question", True),
    ("or make a different", True),
    ('{"answer": "..."} giving the answer', True),
    ("Now make the tool call", True),
    ("Check the tool results above", True),
    ("Do not repeat it.", True),
    ("This call was not run.", True),
    ("Change approach:", True),
    ("the expected format", True),
    ("...or give your final answer.", True),
    ("with your final answer to the user", True),
    ("To use a tool: {", True),
    ("Answer the user's question itself", True),
    ("Reply again with only a JSON value", True),
    ('{"answer": "..."}', True),
    ("the deliverable now", True),
    # answers
    ("12", False),
    ("No", False),
    ("Yes, it is.", False),
    ("Reply with the code 4471 to confirm.", False),
    ("The call failed because the server was down.", False),
    ("Now it works.", False),
    ("The answer: 3.14", False),
    ('{"total": 12}', False),
    ("London is the capital of the UK.", False),
    ("I could not read the file.", False),
    ("Make the tool call to restart it: restart(server)", False),
    ("Different tool, same result: 9.", False),
    ("The user's question was about cats.", False),
    ("Step 3 of 5 done.", False),
    ("Only 2 left.", False),
    ("OK", False),
    ("12 * 7 = 84", False),
    ("sqrt(16) = 4", False),
    ("Final answer: 42", False),
    ("The weather in Lyon is nice.", False),
)
