"""Model families' tool-call formats, rendered the way each family's published chat template,
model card or serving documentation describes them, and the scenarios every family must read.

Each family is a renderer (calls -> the text the model writes) and a thinking wrapper; each
scenario is a list of calls with prose and thinking around them. A case is one scenario
rendered by one family: at least 16 per family, plus the hand-written quirks in ``QUIRKS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thinkloop.types import ToolSpec

Call = tuple[str, dict[str, Any]]

TOOLS = [
    ToolSpec("get_weather", "Weather for a city.", {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "unit": {"type": "string"}},
        "required": ["city"]}),
    ToolSpec("search", "Search.", {
        "type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer"},
            "filter": {"type": "object", "properties": {
                "range": {"type": "object"}, "tags": {"type": "array"}}}},
        "required": ["query"]}),
    ToolSpec("write_file", "Write a file.", {
        "type": "object", "properties": {"path": {"type": "string"},
                                         "content": {"type": "string"}},
        "required": ["path", "content"]}),
    ToolSpec("set_flags", "Typed values.", {
        "type": "object", "properties": {
            "flag": {"type": "boolean"}, "ratio": {"type": "number"},
            "count": {"type": "integer"}, "missing": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limits": {"type": "object"}}}),
    ToolSpec("get_time", "The time now.", {"type": "object", "properties": {}}),
    ToolSpec("echo", "Echo text.", {"type": "object", "properties": {"text": {"type": "string"}},
                                    "required": ["text"]}),
]


@dataclass(frozen=True)
class Scenario:
    name: str
    calls: list[Call]
    before: str = ""
    after: str = ""
    thought: str = ""


SCENARIOS = [
    Scenario("single", [("get_weather", {"city": "Paris"})]),
    Scenario("two-args", [("get_weather", {"city": "Lyon", "unit": "celsius"})]),
    Scenario("two-calls", [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]),
    Scenario("three-tools", [("get_time", {}), ("echo", {"text": "hi"}),
                             ("search", {"query": "llama", "limit": 3})]),
    Scenario("unicode", [("get_weather", {"city": "Zürich — 日本語 ✓ 🎉"})]),
    Scenario("nested", [("search", {"query": "x", "filter": {"range": {"min": 1, "max": 5},
                                                             "tags": ["a", "b"]}})]),
    Scenario("empty-args", [("get_time", {})]),
    Scenario("prose-before", [("get_weather", {"city": "Oslo"})], before="Let me look that up."),
    Scenario("prose-after", [("get_weather", {"city": "Oslo"})], after="I will report back."),
    Scenario("prose-both", [("echo", {"text": "ok"})], before="First, an echo.",
             after="Then the answer."),
    Scenario("thinking", [("get_weather", {"city": "Kyiv"})],
             thought="The user wants the weather; I should call the tool."),
    Scenario("quotes-backslashes", [("write_file", {"path": "C:\\temp\\a.txt",
                                                    "content": 'say "hi" {not json}'})]),
    Scenario("multiline", [("write_file", {"path": "a.py",
                                           "content": "def f():\n    return {'a': 1}"})]),
    Scenario("typed", [("set_flags", {"flag": True, "ratio": 0.5, "count": 0, "missing": None,
                                      "tags": ["x", "y"], "limits": {"max": 2}})]),
    Scenario("numeric-string", [("search", {"query": "2024", "limit": 10})]),
    Scenario("markup-in-value", [("echo", {"text": "the <tool_call> tag and [TOOL_CALLS] token"
                                                   })]),
    Scenario("long-value", [("echo", {"text": "word " * 300 + "end"})]),
]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def text_value(value: Any) -> str:
    """A value as XML-parameter formats write it: strings raw, everything else as JSON."""
    return value if isinstance(value, str) else dumps(value)


def py(value: Any) -> str:
    return repr(value)


# Renderers -----------------------------------------------------------------------------------
def hermes(calls: list[Call]) -> str:
    return "\n".join(f"<tool_call>\n{dumps({'name': n, 'arguments': a})}\n</tool_call>"
                     for n, a in calls)


def qwen3_coder(calls: list[Call]) -> str:
    out = []
    for n, a in calls:
        params = "".join(f"<parameter={k}>\n{text_value(v)}\n</parameter>\n" for k, v in a.items())
        out.append(f"<tool_call>\n<function={n}>\n{params}</function>\n</tool_call>")
    return "\n".join(out)


def glm(calls: list[Call]) -> str:
    out = []
    for n, a in calls:
        pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{text_value(v)}</arg_value>\n"
                        for k, v in a.items())
        out.append(f"<tool_call>{n}\n{pairs}</tool_call>")
    return "\n".join(out)


def deepseek_v3(calls: list[Call]) -> str:
    body = "\n".join(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{dumps(a)}\n```"
                     "<｜tool▁call▁end｜>" for n, a in calls)
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def deepseek_v31(calls: list[Call]) -> str:
    body = "".join(f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{dumps(a)}<｜tool▁call▁end｜>"
                   for n, a in calls)
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def kimi_k2(calls: list[Call]) -> str:
    body = "".join(f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>"
                   f"{dumps(a)}<|tool_call_end|>" for i, (n, a) in enumerate(calls))
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


def mistral_v11(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{dumps(a)}" for n, a in calls)


def mistral_call_id(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[CALL_ID]a1B2c3D4e[ARGS]{dumps(a)}" for n, a in calls)


def mistral_list(calls: list[Call]) -> str:
    return "[TOOL_CALLS] " + dumps([{"name": n, "arguments": a, "id": f"Ab{i}cD3eF"}
                                    for i, (n, a) in enumerate(calls)])


def harmony(calls: list[Call]) -> str:
    return "".join(f"<|start|>assistant<|channel|>commentary to=functions.{n} "
                   f"<|constrain|>json<|message|>{dumps(a)}<|call|>" for n, a in calls)


def llama31_json(calls: list[Call]) -> str:
    return "\n".join(dumps({"name": n, "parameters": a}) for n, a in calls)


def llama_python_tag(calls: list[Call]) -> str:
    return "<|python_tag|>" + "; ".join(dumps({"name": n, "parameters": a})
                                        for n, a in calls) + "<|eom_id|>"


def pythonic(calls: list[Call]) -> str:
    inner = ", ".join(f"{n}({', '.join(f'{k}={py(v)}' for k, v in a.items())})"
                      for n, a in calls)
    return f"[{inner}]"


def llama4_pythonic(calls: list[Call]) -> str:
    return f"<|python_start|>{pythonic(calls)}<|python_end|>"


def granite(calls: list[Call]) -> str:
    return "<|tool_call|>" + dumps([{"name": n, "arguments": a} for n, a in calls])


def internlm2(calls: list[Call]) -> str:
    return "\n".join(f"<|action_start|><|plugin|>\n{dumps({'name': n, 'parameters': a})}"
                     "<|action_end|>" for n, a in calls)


def xlam(calls: list[Call]) -> str:
    return dumps([{"name": n, "arguments": a} for n, a in calls])


def tool_calls_list(calls: list[Call]) -> str:  # Jamba, Hunyuan A13B
    return "<tool_calls>" + dumps([{"name": n, "arguments": a} for n, a in calls]) + \
        "</tool_calls>"


def minimax_m1(calls: list[Call]) -> str:
    lines = "\n".join(dumps({"name": n, "arguments": a}) for n, a in calls)
    return f"<tool_calls>\n{lines}\n</tool_calls>"


def minimax_m2(calls: list[Call]) -> str:
    invokes = "".join(
        f'<invoke name="{n}">\n' + "".join(f'<parameter name="{k}">{text_value(v)}</parameter>\n'
                                           for k, v in a.items()) + "</invoke>\n"
        for n, a in calls)
    return f"<minimax:tool_call>\n{invokes}</minimax:tool_call>"


def phi4_mini(calls: list[Call]) -> str:
    return "functools" + dumps([{"name": n, "arguments": a} for n, a in calls])


def seed_oss(calls: list[Call]) -> str:
    out = []
    for n, a in calls:
        params = "".join(f"<parameter={k}>{text_value(v)}</parameter>\n" for k, v in a.items())
        out.append(f"<seed:tool_call>\n<function={n}>\n{params}</function>\n</seed:tool_call>")
    return "\n".join(out)


def step3(calls: list[Call]) -> str:
    body = "".join(
        f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{n}">'
        + "".join(f'<steptml:parameter name="{k}">{text_value(v)}</steptml:parameter>'
                  for k, v in a.items()) + "</steptml:invoke><｜tool_call_end｜>"
        for n, a in calls)
    return f"<｜tool_calls_begin｜>{body}<｜tool_calls_end｜>"


def lfm2(calls: list[Call]) -> str:  # Liquid's tool-use guide: a pythonic list
    return f"<|tool_call_start|>{pythonic(calls)}<|tool_call_end|>"


def lfm2_json(calls: list[Call]) -> str:  # "Output function calls as JSON" in the prompt
    return "<|tool_call_start|>" + dumps([{"name": n, "arguments": a} for n, a in calls]) + \
        "<|tool_call_end|>"


def olmo3(calls: list[Call]) -> str:  # OLMo 3's template: key=<value as JSON>, a call a line
    lines = "\n".join(f"{n}({', '.join(f'{k}={dumps(v)}' for k, v in a.items())})"
                      for n, a in calls)
    return f"<function_calls>{lines}</function_calls>"


def llama_json_semicolons(calls: list[Call]) -> str:  # Llama 3.x, several calls on a line
    return "; ".join(dumps({"name": n, "parameters": a}) for n, a in calls)


def step3_bare_invoke(calls: list[Call]) -> str:  # Step-3 without "function<｜tool_sep｜>"
    return step3(calls).replace("function<｜tool_sep｜>", "")


def think(text: str) -> str:
    return f"<think>\n{text}\n</think>\n\n"


@dataclass(frozen=True)
class Family:
    name: str
    render: Callable[[list[Call]], str]
    thinking: Callable[[str], str] = think
    # Harmony writes prose as messages of its own, not as text around the calls.
    prose: Callable[[str, str], str] = field(default=lambda text, where: text)
    model: str = ""  # a model name of the family, for protocol="auto"


def _harmony_prose(text: str, where: str) -> str:
    channel = "final" if where == "after" else "commentary"
    end = "<|return|>" if where == "after" else "<|end|>"
    return f"<|start|>assistant<|channel|>{channel}<|message|>{text}{end}"


FAMILIES = [
    Family("hermes", hermes, model="NousResearch/Hermes-3-Llama-3.1-8B"),
    Family("qwen2.5", hermes, model="Qwen/Qwen2.5-7B-Instruct"),
    Family("qwen3-coder", qwen3_coder, model="Qwen/Qwen3-Coder-30B-A3B-Instruct"),
    Family("glm-4.5", glm, model="zai-org/GLM-4.5-Air"),
    Family("deepseek-v3", deepseek_v3, model="deepseek-ai/DeepSeek-V3-0324"),
    Family("deepseek-r1", deepseek_v3, model="deepseek-ai/DeepSeek-R1-0528"),
    Family("deepseek-v3.1", deepseek_v31, model="deepseek-ai/DeepSeek-V3.1"),
    Family("kimi-k2", kimi_k2, model="moonshotai/Kimi-K2-Instruct"),
    Family("mistral-v11", mistral_v11, model="mistralai/Mistral-Small-3.2-24B-Instruct-2506"),
    Family("mistral-call-id", mistral_call_id, model="mistralai/Magistral-Small-2509"),
    Family("mistral-list", mistral_list, model="mistralai/Mistral-7B-Instruct-v0.3"),
    Family("harmony", harmony, thinking=lambda t: (
        f"<|channel|>analysis<|message|>{t}<|end|>"), prose=_harmony_prose,
        model="openai/gpt-oss-20b"),
    Family("llama3.1-json", llama31_json, model="meta-llama/Llama-3.1-8B-Instruct"),
    Family("llama3.1-python-tag", llama_python_tag, model="meta-llama/Llama-3.1-70B-Instruct"),
    Family("llama3.2-pythonic", pythonic, model="meta-llama/Llama-3.2-3B-Instruct"),
    Family("llama4-pythonic", llama4_pythonic, model="meta-llama/Llama-4-Scout-17B-16E"),
    Family("granite", granite, model="ibm-granite/granite-3.3-8b-instruct"),
    Family("internlm2", internlm2, model="internlm/internlm2_5-7b-chat"),
    Family("xlam", xlam, model="Salesforce/Llama-xLAM-2-8b-fc-r"),
    Family("jamba", tool_calls_list, model="ai21labs/AI21-Jamba-Mini-1.6"),
    Family("hunyuan", tool_calls_list, model="tencent/Hunyuan-A13B-Instruct"),
    Family("minimax-m1", minimax_m1, model="MiniMaxAI/MiniMax-M1-80k"),
    Family("minimax-m2", minimax_m2, model="MiniMaxAI/MiniMax-M2"),
    Family("phi-4-mini", phi4_mini, model="microsoft/Phi-4-mini-instruct"),
    Family("seed-oss", seed_oss, thinking=lambda t: f"<seed:think>{t}</seed:think>\n",
           model="ByteDance-Seed/Seed-OSS-36B-Instruct"),
    Family("step3", step3, model="stepfun-ai/step3"),
    Family("magistral", mistral_v11, thinking=lambda t: f"[THINK]{t}[/THINK]",
           model="mistralai/Magistral-Small-2507"),
    Family("lfm2", lfm2, model="LiquidAI/LFM2-1.2B"),
    Family("lfm2.5-json", lfm2_json, model="LiquidAI/LFM2.5-1.2B-Instruct"),
    Family("olmo3", olmo3, model="allenai/Olmo-3-7B-Instruct"),
    Family("llama3.3-json-semicolons", llama_json_semicolons,
           model="meta-llama/Llama-3.3-70B-Instruct"),
    Family("step3-bare-invoke", step3_bare_invoke, model="stepfun-ai/step3"),
]


def render(family: Family, scenario: Scenario) -> str:
    parts = []
    if scenario.thought:
        parts.append(family.thinking(scenario.thought))
    if scenario.before:
        parts.append(family.prose(scenario.before, "before") + "\n")
    parts.append(family.render(scenario.calls))
    if scenario.after:
        parts.append("\n" + family.prose(scenario.after, "after"))
    return "".join(parts)


CASES = [(f"{f.name}:{s.name}", f, s) for f in FAMILIES for s in SCENARIOS]

# Hand-written quirks: (id, text, expected calls, expected prose with spaces collapsed).
QUIRKS: list[tuple[str, str, list[Call], str]] = [
    ("deepseek-end-of-sentence", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
     'get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜end▁of▁sentence｜>', [("get_time", {})], ""),
    ("deepseek-unclosed-section", "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
     '<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>', [("get_weather", {"city": "Paris"})],
     "Checking."),
    ("deepseek-r1-closer-only", "I should check the weather.\n</think>\n\n<｜tool▁calls▁begin｜>"
     '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Rome"}\n```'
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", [("get_weather", {"city": "Rome"})], ""),
    ("kimi-no-section", '<|tool_call_begin|>functions.echo:3<|tool_call_argument_begin|>'
     '{"text": "x"}<|tool_call_end|>', [("echo", {"text": "x"})], ""),
    ("harmony-no-constrain", "<|channel|>commentary to=functions.get_time<|message|>{}<|call|>",
     [("get_time", {})], ""),
    ("harmony-recipient-in-role", '<|start|>assistant to=functions.echo<|channel|>commentary json'
     '<|message|>{"text": "hey"}<|call|>', [("echo", {"text": "hey"})], ""),
    ("harmony-final-only", "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant"
     "<|channel|>final<|message|>It is 4.<|return|>", [], "It is 4."),
    ("glm-no-arguments", "<tool_call>get_time\n</tool_call>", [("get_time", {})], ""),
    ("granite-old-tag", '<tool_call>[{"name": "echo", "arguments": {"text": "a"}}]',
     [("echo", {"text": "a"})], ""),
    ("granite-20b-function-call", '<function_call> {"name": "echo", "arguments": {"text": "a"}}'
     ' <function_call> {"name": "get_time", "arguments": {}}',
     [("echo", {"text": "a"}), ("get_time", {})], ""),
    ("internlm-interpreter-is-code", "<|action_start|><|interpreter|>\nprint(1)\n<|action_end|>",
     [], "<|action_start|><|interpreter|> print(1) <|action_end|>"),
    ("xlam-fenced", '```json\n[{"name": "echo", "arguments": {"text": "z"}}]\n```',
     [("echo", {"text": "z"})], ""),
    ("hunyuan-answer-tags", "<think>Know it.</think>\n<answer>Paris is sunny.</answer>", [],
     "Paris is sunny."),
    ("qwen3-coder-typed-bool", "<tool_call>\n<function=set_flags>\n<parameter=flag>\nfalse\n"
     "</parameter>\n<parameter=count>\n7\n</parameter>\n<parameter=tags>\n['a', 'b']\n"
     "</parameter>\n</function>\n</tool_call>",
     [("set_flags", {"flag": False, "count": 7, "tags": ["a", "b"]})], ""),
    ("minimax-m2-typed-object", '<minimax:tool_call>\n<invoke name="set_flags">\n'
     '<parameter name="limits">{"max": 3}</parameter>\n<parameter name="ratio">1e-3</parameter>'
     "\n</invoke>\n</minimax:tool_call>", [("set_flags", {"limits": {"max": 3}, "ratio": 0.001})],
     ""),
    ("phi4-with-prose", 'Sure.\nfunctools[{"name": "get_time", "arguments": {}}]',
     [("get_time", {})], "Sure."),
    ("llama-eot-after-json", '{"name": "get_time", "parameters": {}}<|eot_id|>',
     [("get_time", {})], ""),
]
