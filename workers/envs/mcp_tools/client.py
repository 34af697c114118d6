"""Synchronous MCP client for environments: `Action(kind='mcp_call')` → a tool call over stdio.

The MCP SDK is async; environments are sync. One background thread runs an event loop that owns
the stdio connection for the session's lifetime (the server starts once, not per call), and
`call` submits coroutines to it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TextIO

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from workers.actions.types import Action
from workers.envs.base import EnvError

_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class McpError(EnvError):
    """The MCP server could not be started or a call failed at the protocol level."""


class McpToolbox:
    """A connection to one MCP server over stdio (by default the session tools server for `root`)."""

    def __init__(
        self, root: Path, server: StdioServerParameters | None = None, timeout_s: float = 20.0
    ) -> None:
        self._params = server or StdioServerParameters(
            command=sys.executable,
            args=["-m", "workers.envs.mcp_tools.server", "--root", str(root)],
            env={"PYTHONPATH": str(_PROJECT_ROOT)},
            cwd=str(root),
        )
        self._timeout = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._lifetime: Future[None] | None = None
        self.tool_names: list[str] = []
        self._start()

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call tool `name`; return {name, arguments, is_error, content, structured, duration_ms}."""
        if self._session is None:
            raise McpError("MCP client is closed")
        if name not in self.tool_names:
            raise McpError(f"unknown MCP tool {name!r}; available: {', '.join(self.tool_names)}")
        t0 = time.perf_counter()
        result = self._submit(self._session.call_tool(name, arguments or {}))
        texts = [getattr(item, "text", "") for item in getattr(result, "content", [])]
        return {
            "name": name,
            "arguments": arguments or {},
            "is_error": bool(getattr(result, "is_error", getattr(result, "isError", False))),
            "content": "\n".join(t for t in texts if t),
            "structured": getattr(result, "structured_content", getattr(result, "structuredContent", None)),
            "duration_ms": round((time.perf_counter() - t0) * 1000, 2),
        }

    def call_action(self, action: Action) -> dict[str, Any]:
        if action.kind != "mcp_call" or not action.name:
            raise EnvError("an mcp_call action needs a tool name")
        return self.call(action.name, action.arguments)

    def close(self) -> None:
        if self._stop is not None and self._lifetime is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            try:
                self._lifetime.result(timeout=self._timeout)
            except Exception:
                pass
        self._session = None
        self._stop = None
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=self._timeout)
        if not self._loop.is_running():
            self._loop.close()

    # internals -------------------------------------------------------------------------------

    def _start(self) -> None:
        ready: Future[list[str]] = Future()
        self._lifetime = asyncio.run_coroutine_threadsafe(self._run(ready), self._loop)
        try:
            self.tool_names = ready.result(timeout=self._timeout)
        except FutureTimeout as exc:
            self.close()
            raise McpError(f"MCP server did not start within {self._timeout:g}s") from exc
        except Exception as exc:
            self.close()
            raise McpError(f"MCP server failed to start: {exc}") from exc

    async def _run(self, ready: Future[list[str]]) -> None:
        """Own the connection: open it, report the tool list, wait for close, tear down."""
        self._stop = asyncio.Event()
        try:
            # The server's own log would interleave with ours; its errors reach us as tool results.
            with open(os.devnull, "w") as errlog:
                await self._serve(ready, errlog)
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def _serve(self, ready: Future[list[str]], errlog: TextIO) -> None:
        assert self._stop is not None
        async with stdio_client(self._params, errlog=errlog) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                self._session = session
                ready.set_result([tool.name for tool in tools.tools])
                await self._stop.wait()

    def _submit(self, coro: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout=self._timeout)
        except FutureTimeout as exc:
            future.cancel()
            raise McpError(f"MCP call timed out after {self._timeout:g}s") from exc
        except EnvError:
            raise
        except Exception as exc:
            raise McpError(f"MCP call failed: {exc}") from exc
