"""Tool-call parser: throughput on a mixed corpus, and linearity on adversarial input.

Throughput: a corpus of realistic replies in every format the parser reads (tool calls,
thinking blocks, broken JSON that needs repair, plain prose), parsed reply by reply. The
baseline, measured in the same run, is UrchinLoop's own single-format reader (its documented
``<<TOOL:...>>`` and ``<<THINK>>`` regexes) over the same corpus: it finds only its own format,
so the ratio is the price of reading every format in one pass.

Streaming: the same corpus fed to ``StreamParser`` in chunks of 8 characters (what the
loopback server sends) and of 64, against whole-reply parsing in the same run; and hostile
replies streamed at 100 KB and 1 MB in 64-character chunks.

Worst case: hostile replies (deep nesting, unbalanced braces, thousands of unclosed tags),
timed at 100 KB and at 1 MB. A linear parser takes ~10x longer on 10x the input; a
backtracking one takes ~100x or never finishes.

Per family (LFM2, OLMo 3, Step-3, Llama 3.x JSON, pythonic, Mistral v11+, Hermes/Qwen): 300
replies in the family's documented format, read with the formats ``auto`` picks for one of
its model names, whole and streamed in 64-character chunks, and a hostile megabyte made of
the family's own markers, whole and streamed in 4 KB chunks.

Usage: python benchmarks/parser.py [--repeat 5] [--adversarial-repeat 3] [--families-only]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from collections.abc import Callable

from thinkloop.core.types import ToolSpec
from thinkloop.protocols import parse_tool_calls
from thinkloop.protocols.stream import StreamParser
from thinkloop.protocols.table import family_of

URCHIN_TOOL = re.compile(r"<<TOOL:(\w+)(?::([\s\S]+?))?>>")
URCHIN_THINK = re.compile(r"<<THINK>>([\s\S]+?)<</THINK>>")

PROSE = ("The quarterly report shows revenue grew 12% while costs were flat. It's worth "
         "checking the [appendix] and the {placeholder} values before we publish. ")


def _args(rng: random.Random) -> dict[str, object]:
    return {"path": f"src/mod_{rng.randrange(1000)}.py", "limit": rng.randrange(100),
            "flags": {"recursive": rng.random() < 0.5, "tags": ["a", "b"]}}


def _reply(rng: random.Random) -> tuple[str, int]:
    """One realistic reply and how many calls it holds."""
    a = _args(rng)
    j = json.dumps(a)
    kinds: list[tuple[str, int]] = [
        (f'<tool_call>\n{{"name": "read_file", "arguments": {j}}}\n</tool_call>', 1),
        (f"<think>{PROSE}</think>\n<tool_call>{{\"name\": \"a\", \"arguments\": {j}}}"
         f"</tool_call>\n<tool_call>{{\"name\": \"b\", \"arguments\": {j}}}</tool_call>", 2),
        (f"<function=read_file>{j}</function>", 1),
        (f'<|python_tag|>{{"name": "read_file", "parameters": {j}}}<|eom_id|>', 1),
        (f'[TOOL_CALLS][{{"name": "read_file", "arguments": {j}}}]', 1),
        (f'[get_weather(city="Paris", days={rng.randrange(7)}), get_time(tz="UTC")]', 2),
        (f"```json\n{{\"name\": \"read_file\", \"arguments\": {j}}}\n```", 1),
        (f"<<THINK>>{PROSE}<</THINK>>\n<<TOOL:WEB_SEARCH:{PROSE[:40]}>>\n<<TOOL:SCAN:{j}>>", 2),
        (f'{{"reasoning": "{PROSE[:60]}", "tools": [{{"name": "search", "arguments": {j}}}], '
         '"completed": false}', 1),
        ("<tool_call_name>read_file</tool_call_name><tool_call_args>"
         f"{j}</tool_call_args>", 1),
        ('<invoke name="search"><parameter name="q">cats</parameter></invoke>', 1),
        ("<tool_call>{name: 'read_file', arguments: {path: 'a\nb', deep: True,},}</tool_call>", 1),
        ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>"
         f"{j}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", 1),
        ("<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0"
         f"<|tool_call_argument_begin|>{j}<|tool_call_end|><|tool_calls_section_end|>", 1),
        (f"<|channel|>analysis<|message|>{PROSE}<|end|><|start|>assistant<|channel|>"
         f"commentary to=functions.read_file <|constrain|>json<|message|>{j}<|call|>", 1),
        ("<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/a.py\n</parameter>\n"
         "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>", 1),
        ("<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n"
         "</tool_call>", 1),
        (f'functools[{{"name": "read_file", "arguments": {j}}}]', 1),
        (PROSE * 3, 0),
        (f"<think>{PROSE}</think>{PROSE}", 0),
    ]
    return kinds[rng.randrange(len(kinds))]


def _pycall(name: str, args: dict[str, object], literal: Callable[[object], str]) -> str:
    return f"{name}({', '.join(f'{k}={literal(v)}' for k, v in args.items())})"


def _family_reply(family: str, rng: random.Random) -> tuple[str, int]:
    """One reply in ``family``'s documented format (sometimes with its usual flaws)."""
    a, b = _args(rng), {"city": rng.choice(["Paris", "Oslo", "Kyiv"]), "days": rng.randrange(7)}
    j, jb = json.dumps(a), json.dumps(b)
    two = rng.random() < 0.5
    if family == "lfm2":
        calls = [_pycall("read_file", a, repr)] + ([_pycall("get_weather", b, repr)] if two else [])
        return f"<|tool_call_start|>[{', '.join(calls)}]<|tool_call_end|>{PROSE[:60]}", 1 + two
    if family == "olmo3":
        calls = [_pycall("read_file", a, json.dumps)] + (
            [_pycall("get_weather", b, json.dumps)] if two else [])
        return f"{PROSE[:50]}<function_calls>{chr(10).join(calls)}</function_calls>", 1 + two
    if family == "step3":
        params = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>\n'
                         for k, v in b.items())
        call = (f"<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\">"
                f"\n{params}</steptml:invoke><｜tool_call_end｜>")
        return f"<｜tool_calls_begin｜>{call}{call if two else ''}<｜tool_calls_end｜>", 1 + two
    if family == "llama3_json":
        first = f'{{"name": "read_file", "parameters": {j}}}'
        rest = f'; {{"name": "get_weather", "arguments": {jb}}}' if two else ""
        return f"I will read the file. {first}{rest}", 1 + two
    if family == "pythonic":
        calls = [_pycall("read_file", a, repr)] + ([_pycall("get_weather", b, repr)] if two else [])
        return f"{PROSE[:70]}\n[{', '.join(calls)}]", 1 + two
    if family == "mistral":
        rest = f"get_weather[ARGS]{jb}" if two else ""
        return f"[TOOL_CALLS]read_file[CALL_ID]aB3dE5gH7[ARGS]{j}{rest}", 1 + two
    unknown = '\n<tool_call>\n{"name": "launch_rocket", "arguments": {}}\n</tool_call>'
    return (f'<tool_call>\n{{"name": "read_file", "arguments": {j}}}\n</tool_call>'
            f"{unknown if two else ''}", 1)


FAMILY_TOOLS = [ToolSpec("read_file", "Read.", {"type": "object", "properties": {
    "path": {"type": "string"}, "limit": {"type": "integer"}, "flags": {"type": "object"}}}),
    ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}})]
FAMILY_MODELS = {"lfm2": "LiquidAI/LFM2-1.2B", "olmo3": "allenai/Olmo-3-7B-Instruct",
                 "step3": "stepfun-ai/step3", "llama3_json": "meta-llama/Llama-3.1-8B-Instruct",
                 "pythonic": "meta-llama/Llama-3.2-3B-Instruct",
                 "mistral": "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
                 "hermes": "Qwen/Qwen2.5-7B-Instruct"}


def family_hostile(n: int) -> dict[str, str]:
    """Per family, input built from its own markers that never completes a call."""
    def fill(unit: str) -> str:
        return unit * (n // len(unit))
    return {
        "lfm2": fill('<|tool_call_start|>[read_file(path="]'),
        "olmo3": fill("<function_calls>read_file(path=1)\n"),
        "step3": fill("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
                      '<steptml:invoke name="f">'),
        "llama3_json": fill('Done. {"name": "f", "parameters": {"a": "'),
        "pythonic": fill("Sure. [f(a="),
        "mistral": fill("[TOOL_CALLS]f[CALL_ID]"),
        "hermes": fill('<tool_call>{"name": "x", '),
    }


def family_table(repeat: int) -> None:
    """Each family's replies read whole (by ``auto``'s choice of formats for the model) and
    streamed, and a hostile megabyte of the family's own markers."""
    rng = random.Random(11)
    hostile = family_hostile(1_000_000)
    print(f"Per family: 300 replies each, median of {repeat}; hostile input 1 MB")
    print(f"{'family':12} {'calls':>9} {'MB/s':>7} {'calls/s':>9} {'stream64':>9} "
          f"{'hostile s':>10} {'streamed s':>11}")
    for family, model in FAMILY_MODELS.items():
        replies = [_family_reply(family, rng) for _ in range(300)]
        formats = family_of(model).formats  # type: ignore[union-attr]
        expected = sum(n for _, n in replies)
        found = sum(len(parse_tool_calls(t, tools=FAMILY_TOOLS, formats=formats).calls)
                    for t, _ in replies)
        texts = [t for t, _ in replies]
        mb = sum(len(t.encode()) for t in texts) / 1e6
        whole = median_time(lambda texts=texts, formats=formats: [
            parse_tool_calls(t, tools=FAMILY_TOOLS, formats=formats) for t in texts], repeat)
        stream = median_time(lambda texts=texts: [stream_once(t, 64, FAMILY_TOOLS)
                                                   for t in texts], repeat)
        bad = hostile[family]
        t_bad = median_time(lambda bad=bad: parse_tool_calls(bad, tools=FAMILY_TOOLS), repeat)
        t_bad_stream = median_time(lambda bad=bad: stream_once(bad, 4096, FAMILY_TOOLS), 1)
        print(f"{family:12} {f'{found}/{expected}':>9} {mb / whole:7.2f} {found / whole:9.0f} "
              f"{stream / whole:8.1f}x {t_bad:10.3f} {t_bad_stream:11.3f}")
    print()


def corpus(target_bytes: int = 2_000_000) -> tuple[list[str], int]:
    rng = random.Random(7)
    replies, calls, size = [], 0, 0
    while size < target_bytes:
        text, n = _reply(rng)
        replies.append(text)
        calls += n
        size += len(text.encode())
    return replies, calls


def adversarial(n: int) -> dict[str, str]:
    return {
        "unbalanced {": "{" * n,
        "unbalanced }": "}" * n,
        "deep nesting": '{"a":' * (n // 5) + "1" + "}" * (n // 5),
        'open keys {"a": "': '{"a": "' * (n // 7),
        "quotes in braces": '{ "' * (n // 3),
        "unbalanced [": "[" * n,
        "unclosed <tool_call>": '<tool_call>{"name": "x", ' * (n // 25),
        "unclosed <<TOOL:": "<<TOOL:X:" * (n // 9),
        "unclosed <think>": "<think>" * (n // 7),
        "unclosed <function=": "<function=a>" * (n // 12),
        "unclosed <|python_tag|>": "<|python_tag|>" * (n // 14),
        "[TOOL_CALLS] x many": "[TOOL_CALLS]" * (n // 12),
        "``` fences": "```\n" * (n // 4),
        "distinct open tags": "".join(f"<t{i}>" for i in range(n // 8))[:n],
        "unclosed DeepSeek sections": "<｜tool▁calls▁begin｜>" * (n // 20),
        "unclosed harmony headers": "<|channel|>commentary to=functions.f" * (n // 40),
        "inline code ticks": "`a " * (n // 3),
        "prose with stray <": "a < b and " * (n // 10),
    }


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def streamed(replies: list[str], size: int) -> int:
    """Every reply fed to a StreamParser in chunks of ``size`` characters; calls found."""
    calls = 0
    for text in replies:
        parser = StreamParser()
        for i in range(0, len(text), size):
            parser.feed(text[i:i + size])
        parser.close()
        calls += len(parser.result().calls)
    return calls


def stream_once(text: str, size: int = 64, tools: list[ToolSpec] | None = None) -> None:
    parser = StreamParser(tools=tools)
    for i in range(0, len(text), size):
        parser.feed(text[i:i + size])
    parser.close()


def adversarial_table(title: str, read: Callable[[str], object], small: dict[str, str],
                      large: dict[str, str], repeat: int) -> None:
    print(f"{title} (median of {repeat}); linear means ~10x")
    print(f"{'input':26} {'100 KB s':>10} {'1 MB s':>10} {'ratio':>7} {'1 MB MB/s':>10}")
    for name in small:
        t_small = median_time(lambda s=small[name]: read(s), repeat)
        t_large = median_time(lambda s=large[name]: read(s), repeat)
        print(f"{name:26} {t_small:10.3f} {t_large:10.3f} {t_large / t_small:6.1f}x "
              f"{len(large[name]) / 1e6 / t_large:10.2f}")


def urchin_baseline(replies: list[str]) -> int:
    found = 0
    for text in replies:
        cleaned = URCHIN_THINK.sub("", text)
        found += len(URCHIN_TOOL.findall(cleaned))
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--adversarial-repeat", type=int, default=3)
    ap.add_argument("--families-only", action="store_true",
                    help="print only the per-family table (issue 37's families)")
    opts = ap.parse_args()
    family_table(opts.adversarial_repeat)
    if opts.families_only:
        return

    replies, expected_calls = corpus()
    mb = sum(len(r.encode()) for r in replies) / 1e6
    parsed_calls = sum(len(parse_tool_calls(r).calls) for r in replies)
    assert parsed_calls == expected_calls, (parsed_calls, expected_calls)
    ours = median_time(lambda: [parse_tool_calls(r) for r in replies], opts.repeat)
    base = median_time(lambda: urchin_baseline(replies), opts.repeat)
    print(f"Mixed corpus: {len(replies)} replies, {mb:.2f} MB, {expected_calls} calls "
          f"(median of {opts.repeat})")
    print(f"{'reader':34} {'s':>8} {'MB/s':>8} {'calls/s':>10} {'replies/s':>10}")
    for name, t, calls in (("parse_tool_calls (every format)", ours, expected_calls),
                           ("UrchinLoop regexes (1 format)", base, urchin_baseline(replies))):
        print(f"{name:34} {t:8.3f} {mb / t:8.2f} {calls / t:10.0f} {len(replies) / t:10.0f}")
    print(f"every-format parser costs {ours / base:.1f}x the single-format regexes\n")

    print(f"Streaming the same corpus (median of {opts.repeat}), against whole replies")
    print(f"{'reader':34} {'s':>8} {'MB/s':>8} {'calls/s':>10} {'x whole':>8}")
    for size in (8, 64):
        assert streamed(replies, size) == expected_calls
        t = median_time(lambda size=size: streamed(replies, size), opts.repeat)
        print(f"{f'StreamParser, {size}-char chunks':34} {t:8.3f} {mb / t:8.2f} "
              f"{expected_calls / t:10.0f} {t / ours:7.1f}x")
    print()

    small, large = adversarial(100_000), adversarial(1_000_000)
    adversarial_table("Adversarial input", parse_tool_calls, small, large,
                      opts.adversarial_repeat)
    adversarial_table("\nAdversarial input streamed in 64-char chunks", stream_once, small,
                      large, opts.adversarial_repeat)

    # For contrast: the seed's lazy regex rescans to the end from every unclosed tag.
    print("\nBaseline, UrchinLoop's <<TOOL:...>> regex on unclosed tags (10 KB vs 100 KB):")
    ten, hundred = "<<TOOL:X:" * 1_111, "<<TOOL:X:" * 11_111
    t10 = median_time(lambda: URCHIN_TOOL.findall(ten), 1)
    t100 = median_time(lambda: URCHIN_TOOL.findall(hundred), 1)
    print(f"{'seed regex':26} {t10:10.3f} {t100:10.3f} {t100 / t10:6.1f}x  (quadratic)")


if __name__ == "__main__":
    main()
