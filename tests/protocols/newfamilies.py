"""Hand-written replies of the newer open-model families (issue 37), as each family's model
card or chat template documents them, and the malformed variants real models write: a missing
closing marker, trailing commas, single quotes, a reply cut off mid-call.

Each case: (id, a model of the family, reply, expected calls (name, arguments) read with
``families.TOOLS``, expected prose with spaces collapsed, how many problems are reported).
"""

from __future__ import annotations

from typing import Any

Call = tuple[str, dict[str, Any]]
Case = tuple[str, str, str, list[Call], str, int]

LFM2 = "LiquidAI/LFM2-1.2B"
OLMO = "allenai/Olmo-3-7B-Instruct"
STEP3 = "stepfun-ai/step3"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
PYTHONIC = "meta-llama/Llama-3.2-3B-Instruct"
MISTRAL = "mistralai/Mistral-Small-3.2-24B-Instruct-2506"
QWEN = "Qwen/Qwen2.5-7B-Instruct"

PARIS: Call = ("get_weather", {"city": "Paris"})
TIME: Call = ("get_time", {})
TYPED: Call = ("set_flags", {"flag": True, "ratio": 0.25, "count": 3, "missing": None,
                             "tags": ["x", "y"], "limits": {"max": 2}})

S_BEGIN, S_END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
C_BEGIN, C_END, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"


def invoke(name: str, **params: str) -> str:
    body = "".join(f'\n<steptml:parameter name="{k}">{v}</steptml:parameter>'
                   for k, v in params.items())
    return f'<steptml:invoke name="{name}">{body}\n</steptml:invoke>'


CASES: list[Case] = [
    # LFM2 / LFM2.5 ------------------------------------------------------------------------
    ("lfm2-documented", LFM2, '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>'
     "Checking the weather in Paris.", [PARIS], "Checking the weather in Paris.", 0),
    ("lfm2-several-in-one-list", LFM2, '<|tool_call_start|>[get_weather(city="Paris"), '
     'get_weather(city="Rome", unit="celsius"), get_time()]<|tool_call_end|>',
     [PARIS, ("get_weather", {"city": "Rome", "unit": "celsius"}), TIME], "", 0),
    ("lfm2-python-literals", LFM2, "<|tool_call_start|>[set_flags(flag=True, ratio=0.25, "
     'count=3, missing=None, tags=["x", "y"], limits={"max": 2})]<|tool_call_end|>',
     [TYPED], "", 0),
    ("lfm2-typed-by-schema", LFM2, '<|tool_call_start|>[set_flags(flag="false", count="7", '
     "ratio='1e-3')]<|tool_call_end|>",
     [("set_flags", {"flag": False, "count": 7, "ratio": 0.001})], "", 0),
    ("lfm2-json-when-asked", LFM2, '<|tool_call_start|>[{"name": "echo", "arguments": '
     '{"text": "hi"}}]<|tool_call_end|>', [("echo", {"text": "hi"})], "", 0),
    ("lfm2-end-marker-inside-a-string", LFM2, "<|tool_call_start|>[echo(text=\"write "
     '<|tool_call_end|> to stop\")]<|tool_call_end|>',
     [("echo", {"text": "write <|tool_call_end|> to stop"})], "", 0),
    ("lfm2-single-quotes-trailing-commas", LFM2, "<|tool_call_start|>[echo(text='it\\'s "
     "[done] (really)',),]<|tool_call_end|>", [("echo", {"text": "it's [done] (really)"})],
     "", 0),
    ("lfm2-argument-named-like-a-keyword", LFM2, '<|tool_call_start|>[echo(text="from=x", '
     'from="en", in=2)]<|tool_call_end|>', [("echo", {"text": "from=x", "from": "en", "in": 2})],
     "", 0),
    ("lfm2-missing-end-marker", LFM2, "Let me see.<|tool_call_start|>[get_time()]", [TIME],
     "Let me see.", 0),
    ("lfm2-list-bracket-lost", LFM2, '<|tool_call_start|>[get_weather(city="Paris")'
     "<|tool_call_end|>", [PARIS], "", 0),
    ("lfm2-bare-call", LFM2, '<|tool_call_start|>get_weather(city="Paris")<|tool_call_end|>',
     [PARIS], "", 0),
    ("lfm2-end-of-message", LFM2, "<|tool_call_start|>[get_time()]<|im_end|>", [TIME], "", 0),
    ("lfm2.5-thinking", LFM2, "<think>The user wants the time.</think>"
     "<|tool_call_start|>[get_time()]<|tool_call_end|>", [TIME], "", 0),
    ("lfm2-cut-off", LFM2, '<|tool_call_start|>[get_weather(city="Par', [],
     '<|tool_call_start|>[get_weather(city="Par', 1),
    ("lfm2-unknown-tool-stays-text", LFM2, "<|tool_call_start|>[launch(x=1)]<|tool_call_end|>",
     [], "<|tool_call_start|>[launch(x=1)]<|tool_call_end|>", 1),
    # OLMo 3 --------------------------------------------------------------------------------
    ("olmo3-documented", OLMO, '<function_calls>get_weather(city="Paris")</function_calls>',
     [PARIS], "", 0),
    ("olmo3-one-call-a-line", OLMO, '<function_calls>get_weather(city="Paris")\n'
     'search(query="llama", limit=3)\nget_time()</function_calls>',
     [PARIS, ("search", {"query": "llama", "limit": 3}), TIME], "", 0),
    ("olmo3-json-values", OLMO, "<function_calls>set_flags(flag=true, ratio=0.25, count=3, "
     'missing=null, tags=["x", "y"], limits={"max": 2})</function_calls>', [TYPED], "", 0),
    ("olmo3-nested-json-literals", OLMO, '<function_calls>search(query="q", filter={"range": '
     '{"open": true, "min": null}, "tags": [false]})</function_calls>',
     [("search", {"query": "q", "filter": {"range": {"open": True, "min": None},
                                           "tags": [False]}})], "", 0),
    ("olmo3-prose-then-calls", OLMO, "I'll check both cities.<function_calls>"
     'get_weather(city="Paris")\nget_weather(city="Rome")</function_calls>',
     [PARIS, ("get_weather", {"city": "Rome"})], "I'll check both cities.", 0),
    ("olmo3-think", "allenai/Olmo-3-7B-Think", "The user asks the time, so I call the tool."
     "</think><function_calls>get_time()</function_calls><|endoftext|>", [TIME], "", 0),
    ("olmo3-indented-trailing-commas", OLMO, "<function_calls>\n  get_weather(city='Paris',)\n"
     "  get_time()\n</function_calls>", [PARIS, TIME], "", 0),
    ("olmo3-multiline-argument", OLMO, '<function_calls>write_file(path="a.py", content="def '
     'f():\\n    return [1]")\nget_time()</function_calls>',
     [("write_file", {"path": "a.py", "content": "def f():\n    return [1]"}), TIME], "", 0),
    ("olmo3-argument-named-like-a-keyword", OLMO, '<function_calls>echo(text="a", class="b")'
     "\nget_time()</function_calls>", [("echo", {"text": "a", "class": "b"}), TIME], "", 0),
    ("olmo3-missing-closer", OLMO, "<function_calls>get_time()", [TIME], "", 0),
    ("olmo3-cut-off", OLMO, '<function_calls>get_weather(city="Par', [],
     '<function_calls>get_weather(city="Par', 1),
    ("olmo3-invoke-wrapper-still-read", OLMO, '<function_calls><invoke name="get_time">'
     "</invoke></function_calls>", [TIME], "", 0),
    # Step-3 --------------------------------------------------------------------------------
    ("step3-typed-by-schema", STEP3, f"{S_BEGIN}{C_BEGIN}function{SEP}"
     + invoke("set_flags", flag="true", ratio="0.25", count="3", missing="null",
              tags='["x", "y"]', limits='{"max": 2}') + f"{C_END}{S_END}", [TYPED], "", 0),
    ("step3-two-calls-on-lines", STEP3, f"{S_BEGIN}\n{C_BEGIN}function{SEP}"
     + invoke("get_weather", city="Paris") + f"{C_END}\n{C_BEGIN}function{SEP}"
     + invoke("get_time") + f"{C_END}\n{S_END}", [PARIS, TIME], "", 0),
    ("step3-without-function-sep", STEP3, f"{S_BEGIN}{C_BEGIN}" + invoke("get_weather",
     city="Paris") + f"{C_END}{S_END}", [PARIS], "", 0),
    ("step3-function-sep-json", STEP3, f'{S_BEGIN}{C_BEGIN}function{SEP}get_weather\n'
     f'{{"city": "Paris",}}{C_END}{S_END}', [PARIS], "", 0),
    ("step3-value-with-markup-chars", STEP3, f"{S_BEGIN}{C_BEGIN}function{SEP}"
     + invoke("echo", text="if a < b and b > c: print('x')") + f"{C_END}{S_END}",
     [("echo", {"text": "if a < b and b > c: print('x')"})], "", 0),
    ("step3-prose-before", STEP3, "Checking now.\n" + f"{S_BEGIN}{C_BEGIN}function{SEP}"
     + invoke("get_time") + f"{C_END}{S_END}", [TIME], "Checking now.", 0),
    ("step3-missing-section-end", STEP3, f"{S_BEGIN}{C_BEGIN}function{SEP}"
     + invoke("get_weather", city="Paris") + C_END, [PARIS], "", 0),
    ("step3-missing-call-end", STEP3, f"{S_BEGIN}{C_BEGIN}function{SEP}"
     + invoke("get_weather", city="Paris") + S_END, [PARIS], "", 0),
    ("step3-cut-off", STEP3, f'{S_BEGIN}{C_BEGIN}function{SEP}<steptml:invoke name="echo">'
     '<steptml:parameter name="text">hal', [], f'{S_BEGIN}{C_BEGIN}function{SEP}'
     '<steptml:invoke name="echo"><steptml:parameter name="text">hal', 3),
    # Llama 3.x JSON ------------------------------------------------------------------------
    ("llama-semicolons", LLAMA, '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
     '{"name": "get_time", "parameters": {}}', [PARIS, TIME], "", 0),
    ("llama-newlines-arguments-and-parameters", LLAMA, '{"name": "get_weather", '
     '"parameters": {"city": "Paris"}}\n{"name": "get_time", "arguments": {}}', [PARIS, TIME],
     "", 0),
    ("llama-after-a-sentence", LLAMA, 'I will look up the weather. {"name": "get_weather", '
     '"parameters": {"city": "Paris"}}', [PARIS], "I will look up the weather.", 0),
    ("llama-after-a-sentence-then-semicolons", LLAMA, 'Two lookups! {"name": "get_weather", '
     '"parameters": {"city": "Paris"}};{"name": "get_time", "parameters": {}};', [PARIS, TIME],
     "Two lookups!", 0),
    ("llama-mention-is-prose", LLAMA, 'You could send {"name": "get_weather", "parameters": '
     '{"city": "Paris"}} to the API yourself.', [], 'You could send {"name": "get_weather", '
     '"parameters": {"city": "Paris"}} to the API yourself.', 0),
    ("llama-mention-after-a-colon-is-prose", LLAMA, 'The call looks like this: {"name": '
     '"get_weather", "parameters": {"city": "Paris"}}', [], 'The call looks like this: {"name": '
     '"get_weather", "parameters": {"city": "Paris"}}', 0),
    ("llama-deep-arguments", LLAMA, '{"name": "search", "parameters": {"query": "q", "filter": '
     '{"range": {"a": {"b": {"c": [1, {"d": [2, {"e": null}]}]}}}, "tags": [["x"]]}}}',
     [("search", {"query": "q", "filter": {"range": {"a": {"b": {"c": [
         1, {"d": [2, {"e": None}]}]}}}, "tags": [["x"]]}})], "", 0),
    ("llama-single-quotes-trailing-commas", LLAMA, "{'name': 'get_weather', 'parameters': "
     "{'city': 'Paris',},}<|eot_id|>", [PARIS], "", 0),
    ("llama-python-tag-semicolons", LLAMA, '<|python_tag|>{"name": "get_weather", '
     '"parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}<|eom_id|>',
     [PARIS, TIME], "", 0),
    ("llama-cut-off", LLAMA, '{"name": "get_weather", "parameters": {"city": "Par', [],
     '{"name": "get_weather", "parameters": {"city": "Par', 1),
    # Pythonic (Llama 3.2 / 4) --------------------------------------------------------------
    ("pythonic-after-a-line-of-prose", PYTHONIC, "Sure, I can check both.\n"
     '[get_weather(city="Paris"), echo(text="x")]', [PARIS, ("echo", {"text": "x"})],
     "Sure, I can check both.", 0),
    ("pythonic-after-a-sentence", PYTHONIC, "Checking. [get_time()]", [TIME], "Checking.", 0),
    ("pythonic-python-literals", PYTHONIC, "[set_flags(flag=True, ratio=0.25, count=3, "
     'missing=None, tags=["x", "y"], limits={"max": 2})]', [TYPED], "", 0),
    ("pythonic-nested", PYTHONIC, '[search(query="q", filter={"range": {"min": 1, "max": '
     '[2, 3]}, "tags": [{"k": False}]})]', [("search", {"query": "q", "filter": {
         "range": {"min": 1, "max": [2, 3]}, "tags": [{"k": False}]}})], "", 0),
    ("pythonic-strings-with-brackets-and-quotes", PYTHONIC, '[echo(text="a ] b [ c \\" d"), '
     "echo(text='it\\'s ) ( ]'), echo(text=\"{not: json}\")]",
     [("echo", {"text": 'a ] b [ c " d'}), ("echo", {"text": "it's ) ( ]"}),
      ("echo", {"text": "{not: json}"})], "", 0),
    ("pythonic-llama4-tags", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
     '<|python_start|>[get_weather(city="Paris"), get_time()]<|python_end|>', [PARIS, TIME],
     "", 0),
    ("pythonic-trailing-commas", PYTHONIC, '[get_weather(city="Paris",), get_time(),]',
     [PARIS, TIME], "", 0),
    ("pythonic-mention-is-prose", PYTHONIC, "Call [get_time()] whenever you like.", [],
     "Call [get_time()] whenever you like.", 0),
    ("pythonic-cut-off", PYTHONIC, '[get_weather(city="Par', [], '[get_weather(city="Par', 0),
    # Mistral v11+ --------------------------------------------------------------------------
    ("mistral-v11-several", MISTRAL, '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
     "[TOOL_CALLS]get_time[ARGS]{}", [PARIS, TIME], "", 0),
    ("mistral-call-ids", "mistralai/Magistral-Small-2509", '[TOOL_CALLS]get_weather[CALL_ID]'
     'aB3dE5gH7[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[CALL_ID]Zx9Yw8Vu7[ARGS]{}',
     [PARIS, TIME], "", 0),
    ("mistral-marker-not-repeated", MISTRAL, '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
     "get_time[ARGS]{}</s>", [PARIS, TIME], "", 0),
    ("mistral-prose-then-calls", MISTRAL, "Let me check.[TOOL_CALLS]get_weather[ARGS]"
     '{"city": "Paris",}', [PARIS], "Let me check.", 0),
    ("mistral-cut-off", MISTRAL, '[TOOL_CALLS]get_weather[ARGS]{"city": "Par', [],
     '[TOOL_CALLS]get_weather[ARGS]{"city": "Par', 1),
    # Hermes / Qwen -------------------------------------------------------------------------
    ("hermes-unknown-tool-stays-text", QWEN, '<tool_call>\n{"name": "launch_rocket", '
     '"arguments": {}}\n</tool_call>', [], '<tool_call> {"name": "launch_rocket", '
     '"arguments": {}} </tool_call>', 1),
    ("hermes-known-and-unknown", QWEN, '<tool_call>\n{"name": "get_time", "arguments": {}}\n'
     '</tool_call>\n<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>',
     [TIME], '<tool_call> {"name": "launch_rocket", "arguments": {}} </tool_call>', 1),
    ("hermes-final-answer-not-offered", QWEN, '<tool_call>\n{"name": "final_answer", '
     '"arguments": {"answer": "It is sunny."}}\n</tool_call>', [], "", 0),
    ("hermes-finish-not-offered", "NousResearch/Hermes-3-Llama-3.1-8B", 'Done.\n<tool_call>\n'
     '{"name": "finish", "arguments": {"summary": "all good"}}\n</tool_call>', [], "Done.", 0),
]
