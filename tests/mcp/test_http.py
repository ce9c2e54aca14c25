"""`skillstate mcp --transport http`: the tools and subscriptions over streamable HTTP, sessions that end and take
their Watch streams with them, a graceful stop on SIGTERM, and where it agrees to listen."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import urllib.error
import urllib.request

import pytest
from mcp.client.subscriptions import ResourceUpdated

from skillstate.clients import StateClient
from skillstate.server.rpc.app import RunningServer

from ..waiting import eventually
from .conftest import INITIAL, SCHEMA, SKILLSTATE, STATE, WAIT, Updates, call, http_server, refused, subscribe, watchers


async def test_tools_and_subscriptions_over_streamable_http(
    server: RunningServer, server_address: str, state: StateClient
) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    async with http_server(server_address) as mcp:
        assert mcp.url.startswith("http://127.0.0.1:")
        updates = Updates()
        async with mcp.client(updates=updates) as client:
            read = await call(client, "get_state", execution_id="warehouse")
            assert read["revision"] == 0 and read["state"] == INITIAL
            await subscribe(client, STATE)
            committed = await call(
                client, "submit_patch", execution_id="warehouse", patch={"status": "picking"}, base_revision=0,
                agent_id="picker",
            )  # fmt: skip
            assert committed["revision"] == 1
            assert await updates.next() == STATE  # on the session's own stream, for its own patch too
            conflict = await call(
                client, "submit_patch", execution_id="warehouse", patch={"status": "x"}, base_revision=0, agent_id="b"
            )
            assert conflict["conflict"] == {**conflict["conflict"], "paths": ["/status"], "head_revision": 1}
            assert "NOT_FOUND" in await refused(client, "get_state", execution_id="nope")

            # a second session, of this SDK's own protocol version, beside it
            async with mcp.client(mode="auto") as modern:
                assert modern.protocol_version == "2026-07-28"
                assert (await call(modern, "get_state", execution_id="warehouse"))["revision"] == 1
                async with modern.listen(resource_subscriptions=[STATE]) as listening:
                    await state.submit_patch("warehouse", {"shipped": 1}, agent_id="sdk", base_revision=1)
                    event = await asyncio.wait_for(anext(listening), WAIT)
                    assert isinstance(event, ResourceUpdated) and event.uri == STATE
                    assert await updates.next() == STATE
                    assert watchers(server) == 1  # both sessions heard it from one Watch
        # the legacy session ended (the client deletes it as it leaves): its Watch ends with it, the server runs on
        await eventually(lambda: watchers(server) == 0)
        assert mcp.process.returncode is None

        async with mcp.client() as client:
            await subscribe(client, STATE)
            await eventually(lambda: watchers(server) == 1)
            mcp.process.terminate()  # SIGTERM: a graceful stop, the open session and its Watch included
            assert await asyncio.wait_for(mcp.process.wait(), WAIT) == 0
        await eventually(lambda: watchers(server) == 0)


@pytest.mark.skipif(sys.platform != "linux", reason="127.0.0.2 is a loopback address on Linux only by default")
async def test_a_web_page_cannot_reach_it_through_dns_rebinding(server_address: str) -> None:
    """A page of evil.example whose name resolves to the loopback address sends its own Host and Origin."""
    async with http_server(server_address, host="127.0.0.2") as mcp:

        def status(**headers: str) -> int:
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "page", "version": "1"},
            }
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
            accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
            request = urllib.request.Request(mcp.url, body, {**accept, **headers}, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=WAIT) as response:
                    return int(response.status)
            except urllib.error.HTTPError as e:
                return e.code

        port = mcp.url.split(":")[2].split("/")[0]
        assert await asyncio.to_thread(status, Host=f"evil.example:{port}") == 421
        assert await asyncio.to_thread(status, Origin="http://evil.example") == 403
        assert await asyncio.to_thread(status, Origin=f"http://127.0.0.2:{port}") == 200


async def test_http_listens_on_loopback_unless_told_otherwise(server_address: str) -> None:
    async def exit_code(*args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            SKILLSTATE, "mcp", "--server", server_address, "--transport", "http", *args,
            stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(), WAIT)
        assert process.returncode is not None
        return process.returncode, err.decode()

    code, err = await exit_code("--listen", "0.0.0.0:0")
    assert code == 2 and "not a loopback address" in err and "--allow-remote" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code, err = await exit_code("--listen", f"127.0.0.1:{taken.getsockname()[1]}")
    assert code == 1 and "cannot listen on 127.0.0.1:" in err
