"""`skillstate mcp` acts with its token's identity and rights, no more: a reader's token reads and is refused a
write, a writer's patches are its agent's, and no token at all is refused, all as the server decides."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.clients import StateClient, open_channel
from skillstate.server.auth import credentials
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from .conftest import call, refused, stdio

STATE = "skillstate://executions/orders/state"


@pytest.fixture
async def secured(db_path: Path) -> AsyncIterator[RunningServer]:
    """A server that requires a token on every call, with the execution `orders` an administrator made."""
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store, auth=Mode.REQUIRED)
    admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
    channel = open_channel(f"127.0.0.1:{running.port}", token=admin.token)
    await StateClient(channel=channel).create_execution("orders", initial_state={"n": 0})
    await channel.close()
    yield running
    await running.stop(grace=0)


async def token(server: RunningServer, agent: str, *rights: Right) -> str:
    return (await credentials.issue(server.credentials, agent, ["orders"], rights=set(rights))).token


async def test_the_token_decides_what_the_client_may_do(secured: RunningServer) -> None:
    address = f"127.0.0.1:{secured.port}"
    async with stdio(address, "--token", await token(secured, "auditor", Right.READ)) as reader:
        assert (await call(reader, "get_state", execution_id="orders"))["state"] == {"n": 0}
        assert (await reader.read_resource(STATE)).contents
        denied = await refused(reader, "submit_patch", execution_id="orders", patch={"n": 1}, base_revision=0)
        assert "PERMISSION_DENIED" in denied
        assert "PERMISSION_DENIED" in await refused(
            reader, "publish_observation", execution_id="orders", to="*", payload=1
        )

    async with stdio(address, "--token", await token(secured, "picker", Right.READ, Right.WRITE)) as writer:
        committed = await call(writer, "submit_patch", execution_id="orders", patch={"n": 1}, base_revision=0)
        assert committed["revision"] == 1  # no agent_id given: the token's agent
        history = await call(writer, "get_history", execution_id="orders")
        assert [r["agent_id"] for r in history["revisions"]] == ["picker"]
        impostor = await refused(
            writer, "submit_patch", execution_id="orders", patch={"n": 2}, base_revision=1, agent_id="root"
        )
        assert "PERMISSION_DENIED" in impostor

    async with stdio(address) as anonymous:
        assert "UNAUTHENTICATED" in await refused(anonymous, "get_state", execution_id="orders")
