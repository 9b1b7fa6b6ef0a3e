"""``thinkloop run`` edges as a user meets them: version, stdin, bad limits, exit codes, --json
names, --tools none, whole tool descriptions. A real process against the loopback server."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import typing
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from test_cli import thinkloop  # tests/cli is on sys.path (rootdir, no package)
from typer.testing import CliRunner

from thinkloop.cli.app import EXIT_CODES, app
from thinkloop.cli.render import first_sentence
from thinkloop.loop.result import RunResult
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.types import RunStatus, Step, Usage


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _env(server: OpenAIServer, **extra: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, **extra}


def test_version() -> None:
    proc = thinkloop("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"thinkloop {version('thinkloop')}\n"


@pytest.mark.parametrize("args", [["-"], []], ids=["dash", "piped"])
def test_the_task_comes_from_stdin(server: OpenAIServer, args: list[str]) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("Paris")))
    proc = thinkloop("run", *args, "--model", "openai:fake", env=_env(server),
                     stdin="What is the capital\nof France?\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Paris\n"
    assert server.requests[0]["messages"][-1]["content"] == "What is the capital\nof France?"


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (["   "], "", "the task is empty"),
    (["-"], "\n\n", "the task is empty"),
    (["hi", "--max-steps", "0"], "", "--max-steps must be at least 1, got 0"),
    (["hi", "--max-steps", "-1"], "", "--max-steps must be at least 1, got -1"),
    (["hi", "--timeout", "0"], "", "--timeout must be more than 0 seconds, got 0"),
    (["hi", "--timeout", "-2.5"], "", "--timeout must be more than 0 seconds, got -2.5"),
])
def test_bad_input_is_a_usage_error_before_any_model_call(
    server: OpenAIServer, args: list[str], stdin: str, message: str
) -> None:
    server.clear()
    proc = thinkloop("run", *args, "--model", "openai:fake", env=_env(server), stdin=stdin)
    assert proc.returncode == 2
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {message}"], proc.stderr
    assert server.requests == [] and proc.stdout == ""


def test_a_run_at_its_step_cap_exits_3_with_its_answer(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "2+2"})])),
                   Reply(body=completion("It is 4.")))
    proc = thinkloop("run", "2+2?", "--model", "openai:fake", "--max-steps", "1",
                     env=_env(server))
    assert proc.returncode == EXIT_CODES["max_steps"] == 3, proc.stderr
    assert proc.stdout == "It is 4.\n"  # printed once
    assert "run ended max_steps" in proc.stderr


def test_an_answer_that_is_only_copied_markup_ends_no_answer_and_says_so(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    # A small model's habit: it copies the end of the outside-content block it just read.
    project = tmp_path / "project"
    project.mkdir()
    (project / "city.txt").write_text("Lyon\n")
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("read_file", {"path": "city.txt"})])),
                   Reply(body=completion('</untrusted_content id="')),
                   Reply(body=completion('</untrusted_content id="')))
    proc = thinkloop("run", "Read city.txt and tell me the city.", "--model", "openai:fake",
                     "--workspace", str(project), env=_env(server))
    # Asked once more without tools, it copied the markup again: no answer, its own exit code.
    assert proc.returncode == 9, proc.stderr
    assert "(outside content) Lyon" in proc.stderr
    assert proc.stdout == ""
    said = " ".join(proc.stderr.split())
    assert "run ended no_answer" in said and "was markup, not prose" in said
    server.clear()
    server.enqueue(Reply(body=completion("Paris")))
    proc = thinkloop("run", "Capital of France?", "--model", "openai:fake", env=_env(server))
    assert proc.stdout == "Paris\n" and "no answer" not in proc.stderr


def test_a_failed_run_exits_1(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(*[Reply(status=401, body={"error": {"message": "bad key"}})] * 3)
    proc = thinkloop("run", "hi", "--model", "openai:fake", env=_env(server))
    assert proc.returncode == 1
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]


def test_every_status_has_its_own_documented_exit_code() -> None:
    statuses = set(typing.get_args(RunStatus))
    assert set(EXIT_CODES) == statuses
    codes = list(EXIT_CODES.values())
    assert len(set(codes)) == len(codes) and 2 not in codes  # 2: usage errors
    readme = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    help_text = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "300"}).output
    for status, code in EXIT_CODES.items():
        assert f"| `{status}` | {code} |" in readme, status
        assert f"{code} {status}" in " ".join(help_text.split()), status


def test_json_names_are_the_python_api_names(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("calculator", {"expression": "6*7"})])),
                   Reply(body=completion("42")))
    proc = thinkloop("run", "6*7?", "--model", "openai:fake", "--json", env=_env(server))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    fields = {f.name for f in dataclasses.fields(RunResult)}
    # ``ok`` is RunResult's property; ``refused`` the CLI's list of refused calls.
    assert fields <= set(out) and set(out) - fields == {"ok", "refused"}
    assert out["refused"] == []
    step = out["steps"][0]
    assert set(step) == {f.name for f in dataclasses.fields(Step)}
    assert set(out["usage"]) == {f.name for f in dataclasses.fields(Usage)} | {"total_tokens"}
    assert step["results"][0]["call"]["name"] == "calculator"
    assert step["results"][0]["content"] == "42"
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool",
                                                    "assistant"]


def test_tools_none_means_no_tools_even_with_memory(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("Hello.")), Reply(body=completion("- greeted")))
    proc = thinkloop("run", "Say hello.", "--model", "openai:fake", "--tools", "none",
                     "--session", "s1", "--json",
                     env=_env(server, THINKLOOP_HOME=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "tools" not in server.requests[0]
    assert json.loads(proc.stdout)["output"] == "Hello."


def test_tools_table_shows_whole_first_sentences() -> None:
    assert first_sentence("Read a file\n  from the workspace. Then more.\n\nArgs: x") == (
        "Read a file from the workspace.")
    assert first_sentence("No full stop here") == "No full stop here"
    from thinkloop.cli.build import all_builtin_tools

    out = " ".join(CliRunner().invoke(app, ["tools"], env={"COLUMNS": "400"}).output.split())
    wrapped = [t for t, _ in all_builtin_tools()
               if first_sentence(t.description) != t.description.splitlines()[0].strip()]
    assert wrapped, "no built-in description wraps its first sentence: nothing to check"
    for t in wrapped:
        assert first_sentence(t.description) in out, t.name


def test_prompt_shows_what_the_local_model_reads() -> None:
    result = CliRunner().invoke(app, ["prompt", "--model", "local", "--json"])
    assert result.exit_code == 0, result.output
    sections = {s["name"]: s for s in json.loads(result.output)}
    listed = sections["tools (listed; at most 3 offered per task)"]
    assert "- calculator(expression: string)" in listed["text"]
    assert "mode=minimal" in sections["runtime"]["text"]
    assert sum(s["tokens"] for s in sections.values()) < 1000


def _run_in_project(
    server: OpenAIServer, tmp_path: Path, files: dict[str, str], task: str,
    steps: list[list[tuple[str, dict[str, str]]]], answer: str,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``thinkloop run TASK --workspace PROJECT --approve auto`` on a project holding
    ``files``, against a model that makes the calls of each step, then answers."""
    project = tmp_path / "project"
    project.mkdir()
    for name, text in files.items():
        (project / name).write_text(text)
    server.clear()
    server.enqueue(*(Reply(body=completion(tool_calls=s)) for s in steps),
                   Reply(body=completion(answer)))
    proc = thinkloop("run", task, "--model", "openai:fake", "--workspace", str(project),
                     "--approve", "auto", env=_env(server, THINKLOOP_HOME=str(tmp_path / "home")))
    return proc, project


def test_workspace_is_where_the_files_go_and_the_header_says_so(
    server: OpenAIServer, tmp_path: Path
) -> None:
    proc, project = _run_in_project(
        server, tmp_path, {"app.py": "print('hi')\n"},
        "What does app.py print? Note it in NOTES.md.",
        [[("read_file", {"path": "app.py"})],
         [("write_file", {"path": "NOTES.md", "content": "prints hi\n"})]],
        "app.py prints hi; I noted that in NOTES.md.")
    home = tmp_path / "home"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "app.py prints hi; I noted that in NOTES.md.\n", proc.stderr
    assert (project / "NOTES.md").read_text() == "prints hi\n"
    assert f"model: openai:fake · workspace: {project.resolve()}\n" in proc.stderr
    assert any("print('hi')" in (m.get("content") or "")  # read from the project itself
               for m in server.requests[1]["messages"] if m["role"] == "tool")

    # Without --workspace, each user has a folder of their own under the workspace base.
    server.clear()
    server.enqueue(Reply(body=completion("Hello.")))
    base = tmp_path / "base"
    proc = thinkloop("run", "hi", "--model", "openai:fake", "--user", "ann",
                     env=_env(server, THINKLOOP_HOME=str(home),
                              THINKLOOP_TOOLS_WORKSPACE=str(base)))
    assert proc.returncode == 0, proc.stderr
    assert f"workspace: {(base / 'ann').resolve()}\n" in proc.stderr


@pytest.mark.parametrize(("where", "message"), [
    ("missing", "--workspace {dir}: no such directory"),
    ("home-parent", "--workspace {dir} holds THINKLOOP_HOME ({home}); choose the project's own "
                    "directory, or set THINKLOOP_HOME outside it"),
    # Inside the home the model would edit the agent's own bootstrap files (issue 30).
    ("inside-home", "--workspace {dir} is inside THINKLOOP_HOME ({home}); choose the "
                    "project's own directory, or set THINKLOOP_HOME outside it"),
])
def test_a_workspace_that_is_missing_or_holds_the_home_is_refused_before_any_call(
    server: OpenAIServer, tmp_path: Path, where: str, message: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    chosen = {"missing": tmp_path / "missing", "home-parent": tmp_path,
              "inside-home": home / "agents" / "thinkloop"}[where]
    if where == "inside-home":
        chosen.mkdir(parents=True)
    server.clear()
    proc = thinkloop("run", "hi", "--model", "openai:fake", "--workspace", str(chosen),
                     env=_env(server, THINKLOOP_HOME=str(home)))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: " + message.format(dir=chosen, home=home.resolve())
    assert server.requests == []


@pytest.mark.parametrize("command", [["run", "hi"], ["serve"], ["worker"]],
                         ids=["run", "serve", "worker"])
def test_a_workspace_variable_inside_the_home_is_refused_by_every_command(
    server: OpenAIServer, tmp_path: Path, command: list[str]
) -> None:
    # The same rule as --workspace, where the settings are read: the variable is refused too.
    home = tmp_path / "home"
    inside = home / "agents" / "thinkloop"
    inside.mkdir(parents=True)
    server.clear()
    proc = thinkloop(*command, env=_env(server, THINKLOOP_HOME=str(home),
                                        THINKLOOP_MODEL="openai:fake",
                                        THINKLOOP_TOOLS_WORKSPACE=str(inside)))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: invalid settings: tools.workspace (environment): {inside} is inside "
        f"THINKLOOP_HOME ({home.resolve()}); choose the project's own directory, or set "
        "THINKLOOP_HOME outside it")
    assert server.requests == []


def test_fix_a_bug_and_run_the_tests_in_a_project_with_every_default_on(
    server: OpenAIServer, tmp_path: Path
) -> None:
    # The first real task of a developer: the files the model reads are outside content, yet
    # the edit it derives from them and the sandboxed test command run (both confined to the
    # project); the test command finds pytest in thinkloop's own environment.
    test = "python -m pytest -q -p no:cacheprovider test_calc.py"
    proc, project = _run_in_project(
        server, tmp_path,
        {"calc.py": "def add(a, b):\n    return a - b\n",
         "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
        "The test in test_calc.py fails. Find the bug in calc.py, fix it, and run the tests.",
        [[("list_dir", {})],
         [("read_file", {"path": "calc.py"}), ("read_file", {"path": "test_calc.py"})],
         [("shell", {"command": test})],
         [("edit_file", {"path": "calc.py", "old_string": "return a - b",
                         "new_string": "return a + b"})],
         [("shell", {"command": test})]],
        "Fixed: add() subtracted; it adds now and test_calc.py passes.")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Fixed: add() subtracted; it adds now and test_calc.py passes.\n"
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 6 and "Not run" not in "".join(results), results
    assert "exit^code:^1" in results[3] and "1^failed" in results[3]  # the bug, seen
    assert results[4] == "edited calc.py: replaced 1 occurrence"
    assert "exit^code:^0" in results[5] and "1^passed" in results[5]  # and fixed


def _with_slow_memory_jobs(
    server: OpenAIServer, home: Path, *options: str,
) -> subprocess.Popen[str]:
    """``thinkloop run "My name is Ada." OPTIONS`` started against a model that answers at once
    and whose memory jobs' calls (a slow extraction model) hang for a minute each."""
    import os
    import sys

    server.clear()
    server.enqueue(Reply(body=completion("Nice to meet you, Ada.")),
                   *[Reply(body=completion("{}"), delay_s=60)] * 4)
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    return subprocess.Popen(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run",
         "My name is Ada.", "--model", "openai:fake", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**base, **_env(server), "THINKLOOP_HOME": str(home)})


def _ctrl_c_while_the_memory_jobs_hang(
    server: OpenAIServer, home: Path,
) -> tuple[int, str, list[tuple[object, ...]]]:
    """``thinkloop run --session`` whose memory jobs' model calls hang for a minute (a slow
    extraction model): the answer must come first, then Ctrl-C while a job's call is in
    flight. Returns the exit code, what stderr said after Ctrl-C, and the owed jobs' rows
    as they were just before it."""
    import signal
    import time

    proc = _with_slow_memory_jobs(server, home, "--session", "first-hour")
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.readline() == "Nice to meet you, Ada.\n"  # before the jobs end
        deadline = time.monotonic() + 60
        while "saving memory" not in proc.stderr.readline():
            assert time.monotonic() < deadline
        # The jobs are under way: a job's model call is in flight.
        while len(server.requests) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        owed = _rows(home, "SELECT run_id FROM owed_jobs")
        proc.send_signal(signal.SIGINT)
        # A hung job's reply is 60 s away: exiting before it means Ctrl-C skipped the jobs.
        proc.wait(timeout=30)
        rest = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return proc.returncode, rest, owed


def _rows(home: Path, sql: str) -> list[tuple[object, ...]]:
    import sqlite3

    with sqlite3.connect(home / "thinkloop.db") as db:
        return db.execute(sql).fetchall()


def test_the_answer_comes_first_and_ctrl_c_skips_the_memory_jobs(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    code, rest, _ = _ctrl_c_while_the_memory_jobs_hang(server, tmp_path)
    assert code == 130
    assert "Traceback" not in rest, rest
    owed = _rows(tmp_path, "SELECT count(*) FROM owed_jobs")[0][0]
    episodes = _rows(tmp_path, "SELECT count(*) FROM memories WHERE kind = 'episode'")[0][0]
    assert (owed, episodes) == (1, 0)  # skipped, not run and not lost: owed to the next run


def test_a_run_whose_every_call_was_refused_says_so_and_exits_10(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("write_file", {
                       "path": "/etc/thinkloop-test.txt", "content": "hi"})])),
                   Reply(body=completion("I could not write it.")))
    home = {"THINKLOOP_HOME": str(tmp_path)}
    proc = thinkloop("run", "Write hi to /etc/thinkloop-test.txt", "--model", "openai:fake",
                     "--approve", "auto", env=_env(server, **home))
    assert proc.returncode == 10, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "thinkloop: refused write_file:" in said and "absolute paths are not allowed" in said
    assert "--workspace DIR" in said and proc.stdout == "I could not write it.\n"
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("write_file", {
                       "path": "notes.txt", "content": "hi"})])),
                   Reply(body=completion("It needs your approval.")))
    proc = thinkloop("run", "Write hi to notes.txt", "--model", "openai:fake", "--json",
                     env=_env(server, **home))  # no terminal to ask on: not approved
    assert proc.returncode == 10, proc.stderr
    (item,) = json.loads(proc.stdout)["refused"]
    assert (item["tool"], item["arguments"]["path"]) == ("write_file", "notes.txt")
    assert item["reason"].startswith("Not approved:") and "--approve auto" in item["allow"]


def test_a_message_to_the_person_at_the_terminal_needs_no_approval(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    server.clear()  # (a refused send_message ended "My name is Ada." with exit 10)
    server.enqueue(Reply(body=completion(tool_calls=[("send_message", {"text": "Hi Ada!"})])),
                   Reply(body=completion("Nice to meet you, Ada.")))
    proc = thinkloop("run", "My name is Ada.", "--model", "openai:fake",
                     env=_env(server, THINKLOOP_HOME=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "[agent] Hi Ada!" in proc.stderr and "refused" not in proc.stderr
    assert proc.stdout == "Nice to meet you, Ada.\n"


def test_a_run_waiting_for_its_session_says_so(server: OpenAIServer, tmp_path: Path) -> None:
    import os
    import sys
    import time

    server.clear()
    server.enqueue(Reply(body=completion("first"), delay_s=6), Reply(body=completion("second")))
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    env = {**base, **_env(server), "THINKLOOP_HOME": str(tmp_path)}
    cli = [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "run"]
    first = subprocess.Popen([*cli, "one", "--model", "openai:fake", "--session", "shared"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not server.requests:  # it holds the session from before its (slow) model call
            assert first.poll() is None and time.monotonic() < deadline, first.stderr
            time.sleep(0.05)
        second = thinkloop("run", "two", "--model", "openai:fake", "--session", "shared",
                           env={**_env(server), "THINKLOOP_HOME": str(tmp_path)})
        out, _err = first.communicate(timeout=120)
    finally:
        first.kill()
        first.wait()
        if first.stdout:
            first.stdout.close()
        if first.stderr:
            first.stderr.close()
    # (the first run's memory jobs may take the second reply: any answer will do here)
    assert second.returncode == 0 and second.stdout.strip(), second.stderr
    assert out == "first\n", out
    assert "waiting for session 'shared': another run is using it" in second.stderr


def test_a_truncated_task_says_how_much_was_cut_and_why(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("A long text.")))
    task = "Summarise this. " + "word " * 40_000  # 200,015 characters once stripped
    proc = thinkloop("run", "-", "--model", "openai:fake", env=_env(server), stdin=task)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert ("note: the task is 200,015 characters: only its first 32,768 go on to the model "
            "(167,247 cut by the input guard's max_message_chars limit)") in said, said
    sent = server.requests[0]["messages"][-1]["content"]
    assert "was 200015 characters long and was truncated to the first 32768" in sent


def test_memory_jobs_skipped_by_ctrl_c_run_on_the_next_run(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    def rows(sql: str) -> list[tuple[object, ...]]:
        return _rows(tmp_path, sql)

    code, _, owed = _ctrl_c_while_the_memory_jobs_hang(server, tmp_path)
    # Owed before the answer was printed, and still owed after Ctrl-C.
    ((first_run,),) = owed
    assert code == 130
    assert rows("SELECT run_id FROM owed_jobs") == [(first_run,)]
    assert rows("SELECT content FROM memories WHERE kind = 'episode'") == []

    server.clear()  # the model answers at once now
    server.enqueue(Reply(body=completion("Hello again.")))
    again = thinkloop("run", "Hello?", "--model", "openai:fake", "--session", "first-hour",
                      env={**_env(server), "THINKLOOP_HOME": str(tmp_path)})
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Hello again.\n"
    # The first run's jobs ran (its episode is kept) and nothing is owed any more.
    episodes = [str(r[0]) for r in rows("SELECT content FROM memories WHERE kind = 'episode'")]
    assert any("User: My name is Ada.\nAssistant: Nice to meet you, Ada." in e
               for e in episodes), episodes
    assert any("User: Hello?" in e for e in episodes), episodes
    assert rows("SELECT run_id FROM owed_jobs") == []


_HELD_THREAD = """
import asyncio, sys, time
from thinkloop.cli.app import _run_to_end

async def main():
    try:
        print("ready", flush=True)
        await asyncio.to_thread(time.sleep, 60)  # a local model's native call, mid-decode
    finally:
        open(sys.argv[1], "w").write("unwound")  # the run's own cleanup (store closed, ...)

_run_to_end(main())
"""


def test_ctrl_c_does_not_wait_for_a_local_models_call_in_its_worker_thread(
    tmp_path: Path,
) -> None:
    """Closing the event loop waits for its worker threads: a local model's decode that
    Ctrl-C interrupted kept ``thinkloop run`` alive 4-5 s after the answer. The run's own
    unwinding still happens first; then the process leaves without waiting for the thread."""
    import signal
    import sys

    marker = tmp_path / "unwound"
    proc = subprocess.Popen([sys.executable, "-c", _HELD_THREAD, str(marker)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        # The thread sleeps 60 s: exiting before then means nothing waited for it.
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert marker.read_text() == "unwound"


def test_json_prints_the_result_before_the_memory_jobs_and_keeps_it_on_ctrl_c(
    server: OpenAIServer, tmp_path: Path,
) -> None:
    """``--json --session`` printed its document only after the memory jobs (a minute with a
    slow extraction model), and Ctrl-C in that wait lost it."""
    import signal
    import time

    proc = _with_slow_memory_jobs(server, tmp_path, "--session", "json-first", "--json")
    assert proc.stdout is not None
    try:
        doc = json.loads(proc.stdout.readline())
        assert (doc["status"], doc["text"], doc["refused"]) == (
            "completed", "Nice to meet you, Ada.", [])
        deadline = time.monotonic() + 60
        while len(server.requests) < 2:  # a memory job's model call is in flight
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert proc.poll() is None  # the document came before the jobs ended
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        assert proc.stdout.read() == ""  # printed once
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
