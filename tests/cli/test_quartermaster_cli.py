"""The quartermaster learns across processes: each ``thinkloop run`` is a process of its own,
and what the earlier ones learned (which tool followed which) is in the default store, so a
later process's request carries the hint. Against the loopback model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_cli import thinkloop  # tests/cli is on sys.path (rootdir, no package)

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

HINT = ("[Quartermaster] After calculator, runs of this agent called calculator next in 100% "
        "of 3 runs. Consider calculator if it fits this task.")


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def calc(expression: str) -> Reply:
    return Reply(body=completion(tool_calls=[("calculator", {"expression": expression})]))


def said_after_results(request: dict[str, object]) -> list[str]:
    tail = []
    for m in reversed(request["messages"]):  # type: ignore[attr-defined]
        if m["role"] != "user":
            break
        tail.append(str(m["content"]))
    return tail[::-1]


def test_a_later_process_gets_the_hint_from_earlier_processes_runs(
        server: OpenAIServer) -> None:
    env = {"OPENAI_BASE_URL": server.base_url}
    args = ("--model", "openai:fake", "--tools", "calculator", "--max-steps", "6")
    for i in range(3):
        server.clear()
        server.enqueue(calc(f"{i}+1"), calc(f"{i}+2"), Reply(body=completion(f"done {i}")))
        proc = thinkloop("run", f"Add {i}+1 and then {i}+2.", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        assert not any(HINT in line for r in server.requests for line in said_after_results(r))
    server.clear()
    server.enqueue(calc("5+1"), Reply(body=completion("6")))
    proc = thinkloop("run", "Add 5+1.", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert said_after_results(server.requests[1]) == [HINT]
