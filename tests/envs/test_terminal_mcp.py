"""The session MCP server spawned for real over stdio, called from the terminal and desktop envs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.actions.types import Action
from workers.envs.base import TaskSpec
from workers.envs.mcp_tools.calculator import CalculatorError, calculate
from workers.envs.mcp_tools.client import McpError, McpToolbox
from workers.envs.terminal import TerminalConfig, TerminalEnv


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpToolbox, Path]]:
    root = tmp_path_factory.mktemp("mcp-root")
    box = McpToolbox(root)
    yield box, root
    box.close()


def test_server_lists_tools_and_calculates(toolbox: tuple[McpToolbox, Path]) -> None:
    box, _ = toolbox
    assert set(box.tool_names) == {"read_file", "write_file", "list_dir", "calculator"}
    result = box.call("calculator", {"expression": "(3 + 4) * 2 ** 3 - 1 / 4"})
    assert not result["is_error"]
    assert result["structured"] == {"result": 55.75}


def test_file_tools_are_confined_to_root(toolbox: tuple[McpToolbox, Path]) -> None:
    box, root = toolbox
    assert not box.call("write_file", {"path": "notes/../n.txt", "content": "ok"})["is_error"]
    assert (root / "n.txt").read_text() == "ok"
    assert box.call("read_file", {"path": "n.txt"})["structured"]["content"] == "ok"
    (root / "out").symlink_to("/etc")
    for args in ({"path": "../../etc/passwd"}, {"path": "/etc/passwd"}, {"path": "out/passwd"}):
        denied = box.call("read_file", args)
        assert denied["is_error"] and "outside the session" in denied["content"]


def test_bad_calls_are_errors_not_crashes(toolbox: tuple[McpToolbox, Path]) -> None:
    box, _ = toolbox
    bad = box.call("calculator", {"expression": "__import__('os').system('true')"})
    assert bad["is_error"] and "unsupported syntax" in bad["content"]
    with pytest.raises(McpError):
        box.call("no_such_tool", {})
    # The server is still serving after the errors.
    assert box.call("calculator", {"expression": "2+2"})["structured"] == {"result": 4.0}


def test_mcp_call_action_through_terminal_env(tmp_path: Path) -> None:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path))
    try:
        env.reset(TaskSpec(task_id="m", instruction="", kind="terminal", source="test"))
        result = env.step(
            Action("mcp_call", name="write_file", arguments={"path": "m.txt", "content": "via mcp"})
        )
        assert result.info["mcp"]["name"] == "write_file"
        assert result.info["mcp"]["arguments"] == {"path": "m.txt", "content": "via mcp"}
        assert not result.info["mcp"]["is_error"]
        # The sandboxed shell sees what the MCP tool wrote: one session directory.
        env.step(Action("type", text="cat m.txt > copy.txt\n"))
        assert (tmp_path / "copy.txt").read_text() == "via mcp"
        missing = env.step(Action("mcp_call", name="nope", arguments={}))
        assert "unknown MCP tool" in missing.info["error"]
    finally:
        env.close()


def test_calculator_rejects_non_arithmetic() -> None:
    assert calculate("-(2 ** 10) % 7") == (-(2**10)) % 7
    for bad in ("a + 1", "2 ** 100000", "1 / 0", "[1]", "x" * 300):
        with pytest.raises(CalculatorError):
            calculate(bad)
