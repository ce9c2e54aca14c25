"""`skillstate mcp` as an MCP client meets it: the real command, started over stdio by the official `mcp` client
or serving streamable HTTP as a subprocess, in front of a real skillstate server on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp_types import (
    CallToolResult,
    EmptyResult,
    ResourceUpdatedNotification,
    SubscribeRequest,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.server.engine.hub import Hub
from skillstate.server.rpc.app import RunningServer

ROOT = Path(__file__).resolve().parents[2]
SKILLSTATE = str(Path(sys.executable).parent / "skillstate")
WAIT = 10.0
"""The longest a test waits for something the server should do at once: generous, so it costs nothing."""


class Updates:
    """The notifications/resources/updated a client receives, as a queue of their URIs."""

    def __init__(self) -> None:
        self.uris: asyncio.Queue[str] = asyncio.Queue()

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.put_nowait(message.params.uri)

    async def next(self) -> str:
        return await asyncio.wait_for(self.uris.get(), WAIT)


@contextlib.asynccontextmanager
async def stdio(
    address: str, *args: str, mode: str = "legacy", updates: Updates | None = None, errlog: Path | None = None
) -> AsyncIterator[Client]:
    """A client of `skillstate mcp --server address ARGS`, started by the client over stdio. `legacy` is the
    initialize handshake today's clients do; `auto` negotiates 2026-07-28 with this SDK."""
    params = StdioServerParameters(command=SKILLSTATE, args=["mcp", "--server", address, *args])
    with contextlib.ExitStack() as files:
        log = files.enter_context(errlog.open("w")) if errlog is not None else sys.stderr
        async with Client(stdio_client(params, errlog=log), mode=mode, message_handler=updates, cache=None) as client:
            yield client


@contextlib.asynccontextmanager
async def http_server(address: str, *args: str, host: str = "127.0.0.1") -> AsyncIterator[HttpServer]:
    """`skillstate mcp --transport http` on a free port of `host`, stopped with SIGTERM at the end."""
    process = await asyncio.create_subprocess_exec(
        SKILLSTATE, "mcp", "--server", address, "--transport", "http", "--listen", f"{host}:0", *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = HttpServer(process)
    try:
        await asyncio.wait_for(running.started(), WAIT)
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)
        await running.drained


class HttpServer:
    """A running `skillstate mcp --transport http`: its URL, and its standard error as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.url = ""
        self.stderr: list[str] = []
        self._url_seen = asyncio.Event()
        self.drained = asyncio.ensure_future(self._drain())

    async def started(self) -> None:
        await self._url_seen.wait()

    async def _drain(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace")
            self.stderr.append(line)
            found = re.search(r"at (http://\S+/mcp)", line)
            if found and not self.url:
                self.url = found.group(1)
                self._url_seen.set()

    def client(self, *, mode: str = "legacy", updates: Updates | None = None) -> Client:
        return Client(self.url, mode=mode, message_handler=updates, cache=None)


async def subscribe(client: Client, uri: str) -> None:
    """resources/subscribe as today's clients send it (the SDK's own helper is deprecated for 2026-07-28)."""
    await client.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult)


async def unsubscribe(client: Client, uri: str) -> None:
    await client.session.send_request(UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)), EmptyResult)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer, failing the test on an error result; its text must say the same."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    answer: dict[str, Any] = result.structured_content
    assert answer is not None and json.loads(text(result)) == answer
    return answer


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool's error result, failing the test if the call succeeded."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text(result)


def text(result: CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


def watchers(server: RunningServer) -> int:
    """Watch streams open on the server: the engine keeps no public count (its metrics gauge reads this)."""
    hub: Hub[Any] = server.engine._revisions
    return hub.count()


def observation_streams(server: RunningServer) -> int:
    """Observation streams open on the server (the other metrics gauge's reading)."""
    return server.engine._observations.stream_count()


@pytest.fixture
async def state(server_address: str) -> AsyncIterator[StateClient]:
    async with StateClient(server_address) as client:
        yield client


@pytest.fixture
async def registry(server_address: str) -> AsyncIterator[SkillRegistryClient]:
    async with SkillRegistryClient(server_address) as client:
        await client.register_folder(ROOT / "skills" / "ship-order")
        yield client


SCHEMA = {
    "type": "object",
    "properties": {
        "shipped": {"type": "integer", "x-merge": "counter"},
        "inventory": {"type": "object", "additionalProperties": {"type": "string"}, "x-merge": "lww"},
        "status": {"type": "string"},
    },
}
"""The README's warehouse: a counter, last-writer-wins shelves, and `status` with no policy: `reject`."""
INITIAL = {"shipped": 0, "inventory": {"shelf_1": "item_7"}, "status": "open"}
STATE = "skillstate://executions/warehouse/state"
"""The state resource of the execution `warehouse`."""
