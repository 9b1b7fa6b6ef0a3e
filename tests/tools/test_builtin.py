from __future__ import annotations

import json
from pathlib import Path

from tests.tools.helpers import approving

from thinkloop.agent import Agent
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.spotlight import unwrap
from thinkloop.tools.builtin import Toolbox, builtin_tools
from thinkloop.tools.builtin.settings import ToolSettings

BASE = ["read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "shell",
        "web_fetch"]
BROWSER = ["browser_open", "browser_snapshot", "browser_click", "browser_type",
           "browser_screenshot"]


def test_builtin_tools_registry(tmp_path: Path) -> None:
    tools = builtin_tools(ToolSettings(workspace=tmp_path / "ws"))
    names = [t.name for t in tools]
    assert names == [*BASE, "web_search", *BROWSER, "send_message", "ask_human", "calculator",
                     "spawn_agent"]
    assert not (tmp_path / "ws").exists()  # nothing is created until a tool is used
    for t in tools:
        assert t.description and t.parameters["type"] == "object"
        assert "ctx" not in t.parameters.get("properties", {})
        json.dumps(t.parameters)
    by = {t.name: t for t in tools}
    assert by["shell"].parameters["required"] == ["command"]
    assert not by["write_file"].idempotent and by["web_fetch"].external


def test_optional_families_follow_settings(tmp_path: Path) -> None:
    reg = tmp_path / "workflows.yaml"
    reg.write_text("workflows:\n  - {name: hello, description: say hello, run: echo hi}\n")
    settings = ToolSettings(workspace=tmp_path / "ws", workflows=reg, search_backend="searxng",
                            searxng_url="http://127.0.0.1:9")
    names = [t.name for t in builtin_tools(settings, browser=False, sub_agents=False)]
    assert names == [*BASE, "web_search", "send_message", "ask_human", "search_tools",
                     "run_workflow", "calculator"]


async def test_agent_uses_file_and_shell_tools_end_to_end(tmp_path: Path) -> None:
    settings = ToolSettings(workspace=tmp_path / "ws")
    async with Toolbox(settings, browser=False) as box:
        model = ScriptedModel([
            reply("", model_call("write_file", path="app/main.py", content="print(6 * 7)\n")),
            reply("", model_call("edit_file", path="app/main.py", old_string="6 * 7",
                                 new_string="6 * 8")),
            reply("", model_call("shell", command="python3 app/main.py")),
            "The program prints 48.",
        ])
        result = await Agent(model, tools=box.tools, guard=approving()).run(
            "write and run", user_id="carol")
    assert result.text == "The program prints 48."
    observations = [unwrap(s.results[0].content) for s in result.steps[:3]]
    assert observations == ["wrote 13 bytes to app/main.py",
                            "edited app/main.py: replaced 1 occurrence",
                            "exit code: 0\n48"]
    assert (tmp_path / "ws/carol/app/main.py").read_text() == "print(6 * 8)\n"


def test_tools_carry_their_guidance_skills_inline_when_few(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "tea.md").write_text("# Brewing tea\nUse water at 80 degrees.\n")
    box = Toolbox(ToolSettings(workspace=tmp_path / "ws", skills=skills), browser=False)
    assert "search_tools" in [t.name for t in box.tools]
    assert "run_workflow" not in [t.name for t in box.tools]
    by = {t.name: t for t in box.tools}
    assert "call ask_human instead of guessing" in by["ask_human"].guidance
    text = by["search_tools"].guidance
    assert "call search_tools" in text
    assert "## tea\nBrewing tea\n# Brewing tea\nUse water at 80 degrees." in text


async def test_spawned_worker_shares_tools_and_workspace(tmp_path: Path) -> None:
    worker_model = ScriptedModel([
        reply("", model_call("read_file", path="from_parent.txt")),
        reply("", model_call("write_file", path="from_worker.txt", content="hi")),
        "Read it; the write was not approved",
    ])
    box = Toolbox(ToolSettings(workspace=tmp_path / "ws"), browser=False,
                  worker_model=worker_model)
    (tmp_path / "ws/dan").mkdir(parents=True)
    (tmp_path / "ws/dan/from_parent.txt").write_text("hello worker\n")
    parent = ScriptedModel([reply("", model_call("spawn_agent", tasks=["read a file"])),
                            "done"])
    result = await Agent(parent, tools=box.tools).run("delegate", user_id="dan")
    content = result.steps[0].results[0].content
    assert content.startswith('<untrusted_content source="spawn_agent"')  # provenance
    assert unwrap(content) == "[1] worker (completed)\nRead it; the write was not approved"
    assert "hello worker" in unwrap(worker_model.calls[1].messages[-1].content)
    # A worker has no approver of its own, and what it read may not steer a write: the
    # write is refused (here by the provenance gate, which looks first), not run.
    assert worker_model.calls[2].messages[-1].content.startswith(
        ("Not approved: write_file needs approval", "Not run: write_file's path",
         "Not run: the user's request did not ask for write_file"))
    assert not (tmp_path / "ws/dan/from_worker.txt").exists()
    worker_tools = [s.name for s in worker_model.calls[0].tools]
    assert "spawn_agent" not in worker_tools and "ask_human" not in worker_tools
    assert "shell" in worker_tools
