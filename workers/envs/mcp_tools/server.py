"""The local MCP server a session's agent can call over stdio: file tools confined to the session
directory and a calculator.

Run: `python -m workers.envs.mcp_tools.server --root SESSION_DIR`
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from workers.envs.base import EnvError
from workers.envs.mcp_tools.calculator import CalculatorError, calculate
from workers.envs.terminal import api_actions

T = TypeVar("T")


def _as_tool_error(func: Callable[[], T]) -> T:
    """Expected failures (bad path, bad expression) reach the agent as a tool error with the reason."""
    try:
        return func()
    except (EnvError, CalculatorError) as exc:
        raise ToolError(str(exc)) from exc


def build_server(root: Path) -> MCPServer:
    """An MCP server whose file tools see only `root` (resolved, symlinks followed, checked)."""
    server: MCPServer = MCPServer(name="flywheel-session-tools", version="1", log_level="WARNING")

    @server.tool(description="Read a UTF-8 text file in the session directory.")
    def read_file(path: str) -> dict[str, Any]:
        return _as_tool_error(lambda: api_actions.read_file(root, path))

    @server.tool(description="Write (create or replace) a text file in the session directory.")
    def write_file(path: str, content: str) -> dict[str, Any]:
        return _as_tool_error(lambda: api_actions.write_file(root, path, content))

    @server.tool(description="List a directory in the session directory ('.' for the top).")
    def list_dir(path: str = ".") -> dict[str, Any]:
        return _as_tool_error(lambda: api_actions.list_dir(root, path))

    @server.tool(description="Evaluate an arithmetic expression such as '(3 + 4) * 2 ** 3'.")
    def calculator(expression: str) -> float:
        return float(_as_tool_error(lambda: calculate(expression)))

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Flywheel session MCP tools (stdio)")
    parser.add_argument("--root", required=True, type=Path, help="the session directory")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    build_server(args.root.resolve()).run("stdio")


if __name__ == "__main__":
    main()
