"""The table of tool-call formats, as data: where each format starts, and which model families
write it. The scanner (``parse``) builds its one marker regex from ``FORMATS`` and dispatches
each match to the handler of the same name; ``FAMILIES`` lets ``protocol="auto"`` read a
reply in the formats of the model that wrote it before falling back to every format.

Sources, each format's public description: DeepSeek V3/V3.1/R1 and Step-3 chat templates
(special-token sections), Kimi K2's tool-call guidance, OpenAI's harmony format (gpt-oss),
Mistral's tokenizer docs (``[TOOL_CALLS]``, v11 ``[ARGS]``, ``[CALL_ID]``), GLM-4.5 and
Qwen3-Coder templates (XML parameters), Hermes/Qwen2.5 ``<tool_call>``, Llama 3.1/3.2/4 model
cards (JSON, ``<|python_tag|>``, pythonic lists), Granite ``<|tool_call|>``, InternLM2
``<|action_start|><|plugin|>``, xLAM JSON lists, Jamba/Hunyuan/MiniMax-M1 ``<tool_calls>``,
MiniMax-M2 ``<minimax:tool_call><invoke>``, Phi-4-mini ``functools[...]``, Seed-OSS
``<seed:tool_call>``, LFM2/LFM2.5 ``<|tool_call_start|>[pythonic]<|tool_call_end|>`` (Liquid's
tool-use guide), OLMo 3 pythonic lines in ``<function_calls>`` (its chat template), and
thinkloop's own seeds (UrchinLoop tags, OrcBot decisions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import regex


@dataclass(frozen=True, slots=True)
class Format:
    """One format: the regex group that finds where it starts (the handler has its name)."""

    name: str
    opener: str
    # Structure that is read whatever the model family (thinking, code, wrappers).
    always: bool = False


# Alternation order matters where openers share a prefix (e.g. ``[TOOL_CALLS]`` before ``[``).
FORMATS: tuple[Format, ...] = (
    Format("utool", r"<<TOOL:"),
    Format("uthink", r"<<THINK>>", always=True),
    Format("uthink_end", r"<</THINK>>", always=True),
    Format("think", r"<(?P<tname>think|thinking|thought|antthinking|reasoning|seed:think)>",
           always=True),
    Format("think_end", r"</(?:think|thinking|thought|seed:think)>", always=True),
    Format("mthink", r"\[THINK\]", always=True),
    Format("harmony", r"<\|start\|>|<\|channel\|>"),
    Format("section", r"<[｜|]tool[▁_]calls?[▁_]begin[｜|]>"
                      r"|<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>"),
    Format("pytag", r"<\|python_tag\|>|<\|python_start\|>"),
    Format("lfm2", r"<\|tool_call_start\|>"),
    Format("granite", r"<\|tool_call\|>"),
    Format("internlm", r"<\|action_start\|>"),
    Format("mistral", r"\[TOOL_CALLS\]"),
    Format("phi4", r"functools\["),
    Format("func", r"<function=(?P<fname>[^<>\s]+)>"),
    # Before "wrap": OLMo 3 writes calls inside <function_calls>; others only wrap <invoke>s.
    Format("olmo", r"<function_calls>"),
    Format("wrap", r"</?function_calls>|</tool_calls>|</?answer>", always=True),
    # End-of-turn tokens some servers leave in the text.
    Format("eot", r"<\|(?:eot_id|eom_id|im_end|end|return|eot|eom|endoftext)\|>|</s>"
                  r"|<[｜|]end[▁_]of[▁_]sentence[｜|]>", always=True),
    Format("xml", r"<(?P<xname>tool_call_name|tool_calls|tool_call|function_call|tool_use"
                  r"|steptml:invoke|invoke|minimax:tool_call|seed:tool_call)"
                  r"(?P<xattr>(?:[\s=][^<>]*)?)>"),
    Format("fence", r"```", always=True),
    Format("code", r"`[^`\n]+`", always=True),
    Format("brace", r"\{"),
    Format("bracket", r"\["),
    Format("tag", r"<(?P<gname>[A-Za-z_][\w.-]*)>"),
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)


@dataclass(frozen=True, slots=True)
class Family:
    """Models whose names match ``pattern`` write calls in ``formats``."""

    name: str
    pattern: re.Pattern[str]
    formats: frozenset[str]


def _family(name: str, pattern: str, *formats: str) -> Family:
    return Family(name, re.compile(pattern, re.IGNORECASE), frozenset(formats))


# First match wins: specific names before the general ones they contain.
FAMILIES: tuple[Family, ...] = (
    _family("deepseek_v31", r"deepseek[-_ ]?v3[._-]?[12]", "section"),
    _family("deepseek", r"deepseek", "section"),
    # Step-3.5 writes Qwen3-Coder's XML; Step-3 its special-token sections (or a bare invoke).
    _family("step3p5", r"step-?3\.5", "xml", "func"),
    _family("step3", r"step-?3", "section", "xml"),
    _family("kimi_k2", r"kimi|moonshot", "section"),
    _family("harmony", r"gpt-?oss", "harmony"),
    # Hermes fine-tunes of Llama and Mistral write Hermes' <tool_call>, not their base's format.
    _family("hermes", r"hermes|nous", "xml"),
    _family("mistral", r"mistral|mixtral|magistral|devstral|codestral|ministral|pixtral",
            "mistral", "brace", "bracket"),
    _family("qwen3_coder", r"qwen3-?coder", "xml", "func"),
    _family("glm", r"glm", "xml"),
    _family("seed_oss", r"seed-?oss", "xml", "func"),
    _family("minimax", r"minimax", "xml"),
    _family("jamba", r"jamba", "xml"),
    _family("hunyuan", r"hunyuan", "xml"),
    _family("granite", r"granite", "granite", "xml"),
    _family("internlm", r"internlm", "internlm"),
    _family("phi4_mini", r"phi-?4", "phi4"),
    _family("lfm2", r"lfm-?2|liquid", "lfm2", "bracket", "brace"),
    _family("olmo3", r"olmo", "olmo", "bracket"),
    _family("xlam", r"xlam", "bracket", "brace", "xml"),
    # Llama 3.2 and 4 are prompted for pythonic lists, but their chat templates ask for JSON.
    _family("llama_pythonic", r"llama-?3\.2|llama-?4", "bracket", "pytag", "brace"),
    _family("llama3_json", r"llama", "brace", "pytag", "func"),
    _family("qwen", r"qwen", "xml"),
)


def family_of(model: str | None) -> Family | None:
    """The family a model name belongs to, or None (unknown: read every format)."""
    if not model:
        return None
    return next((f for f in FAMILIES if f.pattern.search(model)), None)


# Every opener starts with one of these: the lookahead lets the regex engine pass over other
# characters at once instead of trying each alternative there (5-10x faster on long text).
_FIRST = r"(?=[<\[{`f])"


def _pattern(formats: frozenset[str] | None) -> str:
    chosen = [f for f in FORMATS if formats is None or f.always or f.name in formats]
    return _FIRST + "(?:" + "|".join(f"(?P<{f.name}>{f.opener})" for f in chosen) + ")"


@lru_cache(maxsize=64)
def marker(formats: frozenset[str] | None = None) -> re.Pattern[str]:
    """The one regex that finds where any of ``formats`` (None: all) can start."""
    return re.compile(_pattern(formats), re.IGNORECASE)


@lru_cache(maxsize=64)
def partial_marker(formats: frozenset[str] | None = None) -> regex.Pattern[str]:
    """The same regex for streams: ``regex`` reports a marker cut off by the end of the text."""
    return regex.compile(_pattern(formats), regex.IGNORECASE | regex.VERSION0)
