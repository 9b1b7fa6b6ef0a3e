from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.tools.helpers import approving, call

from thinkloop.agent import Agent
from thinkloop.errors import ConfigError
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.spotlight import unwrap
from thinkloop.tools.builtin import builtin_tools
from thinkloop.tools.builtin.embeddings import MiniLMEmbedder
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.toolsearch import Entry, ToolIndex, search_tools_tool
from thinkloop.tools.builtin.workflows import (
    load_registry,
    load_skills,
    run_workflow_tool,
    skills_prompt_section,
)
from thinkloop.tools.workspace import Workspace
from thinkloop.types import ToolCall

REGISTRY = textwrap.dedent("""
    workflows:
      - name: db_backup
        description: Dump a PostgreSQL database to a compressed SQL file
        args:
          database: name of the database to dump
          target: {description: output file, default: backup.sql.gz}
        run: echo "dump $DATABASE to $TARGET" > "$TARGET.log"; cat "$TARGET.log"
      - name: resize_images
        description: Scale every JPEG and PNG picture in a folder down to a maximum width
        args: [folder, width]
        run: echo "resize $FOLDER to $WIDTH px"
      - name: check_disk_space
        description: Report how full each mounted filesystem is
        run: helper.sh
      - name: deploy_site
        description: Build the static website and upload it to the production web server
        run: echo deploying
      - name: send_sales_report
        description: Email the weekly sales figures spreadsheet to the management team
        args: {recipients: comma separated email addresses}
        run: echo "mail to $RECIPIENTS"
      - name: rotate_logs
        description: Compress application log files older than a week and delete ancient ones
        run: echo rotating
      - name: weather_forecast
        description: Get tomorrow's weather forecast for a city
        args: {city: city name}
        run: echo "forecast for $CITY"
      - name: slow
        description: Sleep for a long time
        run: sleep 30
        timeout_s: 1
""")


@pytest.fixture
def registry_path(tmp_path: Path) -> Path:
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "workflows.yaml").write_text(REGISTRY)
    helper = folder / "helper.sh"
    helper.write_text('#!/bin/sh\necho "disk report from $WORKFLOW_DIR in $(pwd)"\n')
    helper.chmod(0o755)
    return folder / "workflows.yaml"


async def test_run_workflow_args_as_env(registry_path: Path, workspace: Workspace,
                                        settings: ToolSettings) -> None:
    tools = [run_workflow_tool(load_registry(registry_path), workspace, settings)]
    root = workspace.root("alice")
    r = await call(tools, "run_workflow", name="db_backup", args={"database": "shop"})
    assert r.content == "exit code: 0\ndump shop to backup.sql.gz"
    assert (root / "backup.sql.gz.log").read_text() == "dump shop to backup.sql.gz\n"
    r = await call(tools, "run_workflow", name="resize_images",
                   args={"folder": "pics", "width": "640"})
    assert r.content == "exit code: 0\nresize pics to 640 px"
    r = await call(tools, "run_workflow", name="check_disk_space")
    assert r.content == f"exit code: 0\ndisk report from {registry_path.parent} in {root}"


async def test_run_workflow_errors(registry_path: Path, workspace: Workspace,
                                   settings: ToolSettings) -> None:
    tools = [run_workflow_tool(load_registry(registry_path), workspace, settings)]
    missing = await call(tools, "run_workflow", name="db_backup")
    assert missing.is_error and "needs argument 'database'" in missing.content
    extra = await call(tools, "run_workflow", name="deploy_site", args={"x": "1"})
    assert extra.is_error and "has no argument(s) x" in extra.content
    unknown = await call(tools, "run_workflow", name="nope")
    assert unknown.is_error and "unknown workflow 'nope'; known workflows: db_backup" in (
        unknown.content)
    slow = await call(tools, "run_workflow", name="slow")
    assert slow.is_error and "workflow 'slow' timed out after 1s" in slow.content


def test_registry_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("workflows:\n  - name: a\n    run: x\n")
    with pytest.raises(ConfigError, match="invalid workflow"):
        load_registry(bad)
    bad.write_text("workflows:\n  - {name: a, description: d, run: x}\n"
                   "  - {name: a, description: e, run: y}\n")
    with pytest.raises(ConfigError, match="duplicate workflow names: a"):
        load_registry(bad)
    bad.write_text("workflows: [unclosed")
    with pytest.raises(ConfigError, match="cannot read workflow registry"):
        load_registry(bad)


def _entries(registry_path: Path) -> list[Entry]:
    return [Entry("workflow", w.name, w.search_text(), w)
            for w in load_registry(registry_path).workflows]


@pytest.mark.parametrize(("query", "expected"), [
    ("make a copy of my postgres data", "db_backup"),
    ("shrink the photos so they are smaller", "resize_images"),
    ("how much free storage is left on the machine", "check_disk_space"),
    ("publish the web site to prod", "deploy_site"),
    ("mail the revenue numbers to the bosses", "send_sales_report"),
    ("will it rain in Paris tomorrow", "weather_forecast"),
    ("clean up old logs", "rotate_logs"),
])
def test_search_finds_paraphrased_workflows(
    query: str, expected: str, registry_path: Path, embedder: MiniLMEmbedder
) -> None:
    index = ToolIndex(_entries(registry_path), embedder)
    hits = index.search(query, k=3)
    assert hits[0].entry.name == expected, [(h.entry.name, h.similarity, h.bm25) for h in hits]


class CountingEmbedder:
    def __init__(self, inner: MiniLMEmbedder, name: str = "all-MiniLM-L6-v2") -> None:
        self.inner = inner
        self.name = name
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_embedding_cache_reused_and_invalidated(
    registry_path: Path, embedder: MiniLMEmbedder
) -> None:
    cache = registry_path.parent / ".embeddings-cache.json"
    first = ToolIndex(_entries(registry_path), CountingEmbedder(embedder), cache)
    first.search("backup")
    assert first.embedded_now == 8 and cache.exists()
    again = ToolIndex(_entries(registry_path), CountingEmbedder(embedder), cache)
    again.search("backup")
    assert again.embedded_now == 0
    registry_path.write_text(REGISTRY.replace("Report how full", "Tell how full"))
    changed_emb = CountingEmbedder(embedder)
    changed = ToolIndex(_entries(registry_path), changed_emb, cache)
    hits = changed.search("how full are the disks")
    assert changed.embedded_now == 1
    assert changed_emb.texts[0].startswith("check disk space: Tell how full")
    assert hits[0].entry.name == "check_disk_space"
    other = ToolIndex(_entries(registry_path), CountingEmbedder(embedder, "other-model"), cache)
    other.search("x")
    assert other.embedded_now == 8


def test_skills_inline_when_few_and_searchable_when_many(
    tmp_path: Path, registry_path: Path, embedder: MiniLMEmbedder
) -> None:
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills/code-review.md").write_text(
        "---\nname: code-review\ndescription: How to review a pull request\n---\n"
        "# Code review\nRead the diff twice. Check tests first.\n")
    (tmp_path / "skills/incident.md").write_text(
        "# Handling a production outage\nPage the on-call engineer, then open a status page.\n")
    skills = load_skills(tmp_path / "skills")
    assert [(s.name, s.description) for s in skills] == [
        ("code-review", "How to review a pull request"),
        ("incident", "Handling a production outage")]
    inline = skills_prompt_section(skills)
    assert "## code-review\nHow to review a pull request\n# Code review\nRead the diff twice." \
        in inline
    assert "search_tools" in skills_prompt_section(skills, max_inline=1)
    entries = _entries(registry_path) + [Entry("skill", s.name, s.search_text(), s)
                                         for s in skills]
    tool = search_tools_tool(ToolIndex(entries, embedder))
    out = tool.fn(query="the site is down, what do I do", limit=2)
    assert out.startswith("skill incident: Handling a production outage\n# Handling a")
    assert tool.fn(query="bake a chocolate cake") == (
        "nothing relevant found for 'bake a chocolate cake'; use the built-in tools")
    out = tool.fn(query="back up the shop database", limit=1)
    assert out == ("workflow db_backup: Dump a PostgreSQL database to a compressed SQL file\n"
                   "  args: database: name of the database to dump; "
                   "target (optional): output file")


async def test_agent_finds_and_runs_a_workflow(
    registry_path: Path, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    settings = ToolSettings(workspace=tmp_path / "ws", workflows=registry_path)
    tools = builtin_tools(settings, browser=False, sub_agents=False, embedder=embedder)
    model = ScriptedModel([
        reply("", model_call("search_tools", query="what's the weather going to be in Oslo",
                             limit=1)),
        reply("", ToolCall("w1", "run_workflow",
                           {"name": "weather_forecast", "args": {"city": "Oslo"}})),
        "Forecast fetched.",
    ])
    result = await Agent(model, tools=tools, guard=approving()).run("weather in Oslo?",
                                                                    user_id="eve")
    found, ran = (s.results[0].content for s in result.steps[:2])
    assert found == "workflow weather_forecast: Get tomorrow's weather forecast for a city\n" \
                    "  args: city: city name"
    assert unwrap(ran) == "exit code: 0\nforecast for Oslo"
    assert (registry_path.parent / ".embeddings-cache.json").exists()


async def test_workflows_and_commands_share_the_sandbox_caps(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    """run_workflow starts a sandbox as shell does: one run's workflows and commands together
    stay under the per-run cap (they once ran uncapped: 150 calls, 150 sandboxes)."""
    from tests.sandbox.test_bwrap import _overlap

    from thinkloop.sandbox import SANDBOXES_PER_RUN

    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "workflows.yaml").write_text(textwrap.dedent("""
        workflows:
          - name: stamp
            description: Write start and end stamps
            args: [i]
            run: date +%s%N > s_w$I; sleep 0.4; date +%s%N > e_w$I
    """))
    settings = ToolSettings(workspace=tmp_path / "ws", workflows=folder / "workflows.yaml")
    tools = builtin_tools(settings, browser=False, sub_agents=False, embedder=embedder)
    stamp = "date +%s%N > s_c{0}; sleep 0.4; date +%s%N > e_c{0}"
    calls = [ToolCall(f"w{i}", "run_workflow", {"name": "stamp", "args": {"i": str(i)}})
             for i in range(8)]
    calls += [ToolCall(f"c{i}", "shell", {"command": stamp.format(i)}) for i in range(8)]
    model = ScriptedModel([reply("", *calls), "Ran them all."])
    result = await Agent(model, tools=tools, guard=approving(), store="memory",
                         max_steps=4).run("run them", user_id="eve")
    assert result.status == "completed", result.error
    root = tmp_path / "ws" / "eve"
    assert len(list(root.glob("e_*"))) == 16
    assert 1 < _overlap(root) <= SANDBOXES_PER_RUN
