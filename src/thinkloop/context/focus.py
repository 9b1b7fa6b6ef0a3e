"""Small models see only the few tools that matter for the task.

A 135M model offered twenty tools picks one at random (``list_dir({"path": "list_dir"})``);
offered the three that match the task, it picks the right one. The tools are ranked once per
run by BM25 over each tool's name, description and parameter names against the task, so
every step of a run offers the same tools (and the local model's prompt prefix, hence its
KV cache, stays the same between steps). Tools the run has already called stay offered.

MiniLM embeddings (``memory.recall.MiniLMEmbedder``) were the first choice; loading them
costs seconds of start-up (torch), more than the whole run of a small task on the local
model, so words it is: name the tool's job in the task ("calculate", "read the file").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from thinkloop.arithmetic import phrases_in
from thinkloop.context.tokens import model_window
from thinkloop.core.types import ToolSpec

# Models with a context window below this are "small": minimal prompt, few tools.
SMALL_WINDOW = 8192
FOCUS_TOOLS = 3


def is_small(model: Any) -> bool:
    return model_window(model) < SMALL_WINDOW


# An arithmetic expression in a task asks for arithmetic, whatever words surround it.
_ARITHMETIC = re.compile(r"\d\s*(?:\*\*|[-+*/^%])\s*[\d(]|\(\s*\d|sqrt|\bsquare root")
# Tools scoring under this share of the best score are left out: one clear match beats
# three for a small model, which otherwise picks among them at random.
RELATIVE_CUT = 0.5
# Words of a task that name no tool's job ("Use the calculator", "please use a tool"): every
# tool's description may say when to use it, so they would only match the wordiest ones.
GENERIC = re.compile(r"\b(?:use|using|uses|tools?|please)\b", re.IGNORECASE)
# A task naming a file ("cat fruit.txt", "Open pet.txt.", "What does notes.txt say?") wants
# it read unless it says to change it: its words may name no file tool's job at all.
_FILE_NAME = re.compile(r"(?<![\w/.-])[\w-][\w.-]{0,128}\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/-])")
_CHANGES = re.compile(r"\b(?:write|create|save|store|append|edit|change|replace|delete|remove|"
                      r"rename|put|insert|update|overwrite|make)\b", re.IGNORECASE)


# Verbs that, as an order (a clause's first word) naming a file, mean writing it: "Save X in
# f.txt", "then put X into f.txt"; "What did I save in f.txt?" orders nothing.
_WRITE_ORDER = re.compile(r"(?:^|[.;,!?]\s*|\b(?:then|and|please)\s+)(?:save|store|put|create|"
                          r"record)\b", re.IGNORECASE)
# A task naming a command asks for the shell; plain arithmetic does not (the calculator
# suffices, and a small model offered the shell runs "25%" in it).
_COMMAND = re.compile(r"`|\b(?:run|execute|command|commands|shell|terminal|bash|script)\b",
                      re.IGNORECASE)
RUNNERS = frozenset({"shell"})


def _is_arithmetic(task: str) -> bool:
    return bool(_ARITHMETIC.search(task) or phrases_in(task))


def _implied(task: str) -> str:
    """Words for the job a task implies without naming it: arithmetic in everyday forms,
    reading a file it names, writing one it orders saved."""
    words = ""
    if _is_arithmetic(task):
        words += " arithmetic"
    if _FILE_NAME.search(task) and not _CHANGES.search(task):
        words += " read file"
    if _FILE_NAME.search(task) and _WRITE_ORDER.search(task):
        words += " write file"
    return words


def _left_out(task: str) -> frozenset[str]:
    """Tools a task has no use for: writers when it changes no file, the shell for plain
    arithmetic naming no command or file."""
    out: frozenset[str] = frozenset()
    if not _CHANGES.search(task):
        out |= WRITERS
    if _is_arithmetic(task) and not _COMMAND.search(task) and not _FILE_NAME.search(task):
        out |= RUNNERS
    return out


# The tools that change files: not offered for a task that says nothing of changing one (a
# small model told to call a tool for "cat fruit.txt" otherwise may overwrite the file).
WRITERS = frozenset({"write_file", "edit_file"})


def _own(spec: ToolSpec) -> str:
    """What the tool is: its name and description."""
    return f"{spec.name.replace('_', ' ')} {spec.description}"


def _doc(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties") or {}
    described = " ".join(f"{k} {v.get('description', '')}" for k, v in props.items()
                         if isinstance(v, dict))
    return f"{_own(spec)} {described}"


def _scores(query: list[str], docs: list[str]) -> Sequence[float]:
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
    return [float(s) for s in index.get_scores(query)]


def rank_tools(task: str, tools: Sequence[ToolSpec], k: int = FOCUS_TOOLS) -> list[ToolSpec]:
    """At most ``k`` tools whose documentation matches ``task`` (BM25), best first; those far
    behind the best are left out, and with no match at all none is offered."""
    import bm25s

    words = GENERIC.sub(" ", re.sub(r"[_\W]+", " ", task))
    words += _implied(task)
    query = bm25s.tokenize([words], stopwords="en", show_progress=False, return_ids=False)[0]
    if not query or not tools:
        return []
    # A tool is ranked by its whole documentation, but only if the task matches what the tool
    # is (name, description): a word that only its parameters share ("My name is Ada." and
    # send_message's recipient "name") names no job, and a small model offered that tool for
    # a greeting calls it until the steps run out.
    left_out = _left_out(task)
    own = _scores(query, [_own(t) for t in tools])
    scores = [0.0 if t.name in left_out or o <= 0 else s for t, s, o in
              zip(tools, _scores(query, [_doc(t) for t in tools]), own, strict=True)]
    best = max(scores)
    order = sorted(range(len(tools)), key=lambda i: (-scores[i], i))
    return [tools[i] for i in order[:k] if best > 0 and scores[i] >= RELATIVE_CUT * best]
