"""Prompt size: what ``thinkloop run`` sends before the task, in tokens.

The agent is the CLI's (``cli.build.build_agent``: default tools, guards, bootstrap files in a
fresh ``THINKLOOP_HOME``), the count ``thinkloop prompt``'s (about a token per four UTF-8
bytes). Two models:

* local        the bundled small model (4K context): the minimal prompt, and for each sample
               task the tool list it reads, which holds the (at most 3) tools ranked for the
               task (context/focus.py). Goal: under a quarter of the window, so that three
               quarters are left for the task, files and steps. Baseline in the same run: the
               same prompt listing every default tool (what it would read without the focus).
* remote       a large model (``openai:gpt-4o``): the full prompt plus the default tools'
               schemas as sent natively (compact JSON). Information: no goal.

Usage: python benchmarks/prompt_size.py
"""

from __future__ import annotations

import os
import tempfile

TASKS = (
    "What is 17 * 23?",
    "Read notes.txt and tell me its first line.",
    "List the files in the workspace.",
    "Fetch https://example.com and summarise the page.",
    "Find every TODO in the python files.",
)
SMALL_WINDOW = 4096
GOAL_TOKENS = SMALL_WINDOW // 4


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        os.environ["THINKLOOP_HOME"] = home  # default bootstrap files, no user's settings
        report()


def report() -> None:
    from thinkloop.cli.build import AgentOptions, build_agent
    from thinkloop.cli.prompt import PreviewModel, render_sections
    from thinkloop.context.focus import rank_tools
    from thinkloop.context.tokens import heuristic_count
    from thinkloop.models.decision import tools_prompt
    from thinkloop.settings import load_settings

    local, mode = render_sections("thinkloop", None, None, None, "local", False)
    prompt = sum(t for name, _, t in local if not name.startswith("tools"))
    listed = sum(t for name, _, t in local if name.startswith("tools"))
    print(f"\nlocal model ({mode} prompt, {SMALL_WINDOW}-token window): goal < {GOAL_TOKENS} "
          "tokens before the task\n")
    print(f"{'what the model reads':<52} {'tokens':>7} {'of window':>10} {'holds':>6}")
    print(f"{f'prompt sections ({len(local) - 1})':<52} {prompt:>7} "
          f"{prompt / SMALL_WINDOW:>10.0%}")
    print(f"{'+ every default tool listed (baseline)':<52} {prompt + listed:>7} "
          f"{(prompt + listed) / SMALL_WINDOW:>10.0%} {'-':>6}")
    agent = build_agent(AgentOptions(model="local"), load_settings(), model=PreviewModel("local"))
    specs = [t.spec for t in agent.tools.values()]
    for task in TASKS:
        offered = rank_tools(task, specs)
        total = prompt + heuristic_count(tools_prompt(offered))
        label = f"+ tools for {task!r}"[:52]
        print(f"{label:<52} {total:>7} {total / SMALL_WINDOW:>10.0%} "
              f"{'yes' if total < GOAL_TOKENS else 'no':>6}")
    print("\nsections: " + ", ".join(f"{n} {t}" for n, _, t in local[:-1]))
    print("tools offered: " + "; ".join(
        f"{', '.join(s.name for s in rank_tools(t, specs)) or '-'}" for t in TASKS))

    remote, mode = render_sections("thinkloop", None, None, None, "openai:gpt-4o", False)
    print(f"\nremote model (openai:gpt-4o, {mode} prompt): information\n")
    for name, _, tokens in remote:
        print(f"{name:<52} {tokens:>7}")
    print(f"{'total':<52} {sum(t for _, _, t in remote):>7}")


if __name__ == "__main__":
    main()
