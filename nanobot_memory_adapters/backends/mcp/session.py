"""One MCP server process over stdio, kept open for the adapter's lifetime.

The SDK's client is a pair of nested async context managers whose task group must be
entered and left by the same task, so one background task owns them and the adapter's
calls share its ``ClientSession`` (which multiplexes concurrent requests itself).
A session belongs to the event loop that opened it; a call from another loop opens a
fresh one (the harness may drive an adapter from more than one loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent


class ToolError(RuntimeError):
    """The server answered a tool call with ``isError`` (its own message kept)."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"tool {tool!r} failed: {message}")
        self.tool = tool


class ServerGone(ConnectionError):
    """The server process ended or its pipe broke; the next call starts it again (a
    connection error, so a write that met it is kept for a retry)."""


# What the SDK raises when the server's end of the pipe is gone.
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class StdioServer:
    """Start the configured server command on first use; ``call`` a tool; ``close``."""

    def __init__(self, params: StdioServerParameters, *, stderr_log: Path,
                 connect_timeout_s: float, call_timeout_s: float) -> None:
        self.params = params
        self.stderr_log = stderr_log
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self._session: ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.server_info: dict[str, Any] = {}

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        self.stderr_log.parent.mkdir(parents=True, exist_ok=True)
        errlog: IO[str]
        with open(self.stderr_log, "a", encoding="utf-8") as errlog:
            try:
                async with (
                    stdio_client(self.params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    init = await session.initialize()
                    listed = await session.list_tools()
                    self.server_info = init.serverInfo.model_dump(mode="json")
                    self.tools = {t.name: t.inputSchema for t in listed.tools}
                    self._session = session
                    ready.set_result(None)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc if isinstance(exc, Exception) else
                                        RuntimeError(f"server session ended: {exc!r}"))
                if not isinstance(exc, Exception):
                    raise
            finally:
                self._session = None

    async def session(self) -> ClientSession:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or a new event loop: open our own
            old_loop, old_stop = self._loop, self._stop
            if old_loop is not None and old_stop is not None and not old_loop.is_closed():
                # the old loop's task ends its server (stdin closes, the server exits)
                old_loop.call_soon_threadsafe(old_stop.set)
            self._session, self._owner, self._loop = None, None, loop
            self._lock = asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._session is not None and self._owner is not None and not self._owner.done():
                return self._session
            ready: asyncio.Future[None] = loop.create_future()
            self._stop = asyncio.Event()
            self._owner = loop.create_task(self._own(ready, self._stop))
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout_s)
            except BaseException:
                await self._shutdown()
                raise
            assert self._session is not None
            return self._session

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result as data: ``structuredContent`` when the server sends it,
        else its text content parsed as JSON (or the text itself)."""
        session = await self.session()
        try:
            result = await asyncio.wait_for(session.call_tool(tool, arguments),
                                            self.call_timeout_s)
        except TimeoutError as exc:
            # No answer in time: the process may have died between two calls (a request
            # written after the SDK saw the pipe close waits forever), or hangs. Either
            # way it is ended, and the next call starts it again.
            await self.close()
            raise ServerGone(f"the MCP server did not answer {tool!r} within "
                             f"{self.call_timeout_s}s and was stopped (gone or hung); its "
                             f"stderr is in {self.stderr_log}") from exc
        except (McpError, *_GONE) as exc:
            if isinstance(exc, McpError) and "connection closed" not in str(exc).lower():
                raise  # the server answered with a protocol error: it is alive
            await self.close()
            raise ServerGone(f"the MCP server is gone ({type(exc).__name__}: {exc}); "
                             f"its stderr is in {self.stderr_log}") from exc
        return _data(tool, result)

    async def _shutdown(self) -> None:
        owner, stop = self._owner, self._stop
        self._owner = None
        if stop is not None:
            stop.set()
        if owner is not None and owner.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, 10)
            if not owner.done():
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner

    async def close(self) -> None:
        await self._shutdown()
        self._session = None


def _data(tool: str, result: CallToolResult) -> Any:
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    if result.isError:
        raise ToolError(tool, text[:2000] or "no message")
    if result.structuredContent is not None:
        return result.structuredContent
    try:
        return json.loads(text)
    except ValueError:
        return text
