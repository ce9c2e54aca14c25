"""Executions listed and deleted: ListExecutions pages by id and prefix with each execution's head, times
and agents, showing only what the caller may read; DeleteExecution removes one whole, ends its watches and
streams NOT_FOUND, and leaves its id free to start fresh."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillstate.clients import NotFoundError, PermissionDeniedError, StateClient
from skillstate.server.auth import credentials
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from ..cli.test_cli import skillstate


async def test_executions_are_listed_by_id_page_by_page_with_their_head_and_agents(client: StateClient) -> None:
    before = datetime.now(UTC)
    for execution_id in ("order-2", "order-1", "other", "order-10"):
        await client.create_execution(execution_id, initial_state={"n": 0})
    for agent, base in (("picker", 0), ("packer", 1), ("picker", 2)):
        await client.submit_patch("order-1", {agent: base}, agent_id=agent, base_revision=base)
    listed = [summary async for summary in client.executions("order", page_size=2)]
    assert [s.execution_id for s in listed] == ["order-1", "order-10", "order-2"]
    first = listed[0]
    assert (first.head_revision, first.agents, first.agent_count) == (3, ("packer", "picker"), 2)
    assert before <= first.create_time <= first.update_time <= datetime.now(UTC)  # type: ignore[operator]
    assert listed[1].head_revision == 0 and listed[1].update_time == listed[1].create_time
    page = await client.list_executions(page_size=3)
    assert len(page.executions) == 3 and page.next_page_token
    rest = await client.list_executions(page_size=3, page_token=page.next_page_token)
    assert [s.execution_id for s in rest.executions] == ["other"] and not rest.next_page_token


async def test_a_deleted_execution_ends_its_streams_and_its_id_starts_fresh(client: StateClient) -> None:
    await client.create_execution("x", initial_state={"n": 0})
    await client.submit_patch("x", {"n": 1}, agent_id="a", base_revision=0, client_patch_id="k1")
    await client.publish_observation("x", "*", {"event": "before"})
    following = [asyncio.Event() for _ in range(3)]  # set once a stream got what was there: it follows

    async def watch() -> None:
        async for _ in client.watch("x", resume=False):
            following[0].set()

    async def observe() -> None:
        async for _ in client.observations("x", "a", resume=False):
            following[1].set()

    async def session_revisions() -> None:
        async with client.session("x", agent_id="s", from_revision=0) as session:
            async for _ in session.revisions():
                following[2].set()

    streams = [asyncio.create_task(run()) for run in (watch, observe, session_revisions)]
    await asyncio.gather(*(event.wait() for event in following))
    assert await client.delete_execution("x") == 1
    outcomes = await asyncio.gather(*streams, return_exceptions=True)
    assert all(isinstance(outcome, NotFoundError) for outcome in outcomes), outcomes
    with pytest.raises(NotFoundError):
        await client.get_state("x")
    with pytest.raises(NotFoundError):
        await client.delete_execution("x")
    assert [s.execution_id async for s in client.executions()] == []

    await client.create_execution("x", initial_state={"fresh": True})
    again = await client.submit_patch("x", {"n": 1}, agent_id="a", base_revision=0, client_patch_id="k1")
    assert (again.revision, again.duplicate) == (1, False)  # the old idempotency key is forgotten with it
    assert (await client.get_state("x")).state == {"fresh": True, "n": 1}
    assert [e.revision async for e in client.history("x")] == [1]


async def test_writes_racing_a_delete_are_committed_before_it_or_refused_not_found(client: StateClient) -> None:
    await client.create_execution("x", initial_state={})

    async def write(n: int) -> object:
        try:
            return (await client.submit_patch("x", {f"k{n}": n}, agent_id=f"w{n}", base_revision=0)).revision
        except NotFoundError as refused:
            return refused

    writes = [asyncio.ensure_future(write(n)) for n in range(40)]
    await asyncio.sleep(0)  # some are merged, some not yet sent
    head = await client.delete_execution("x")
    outcomes = await asyncio.gather(*writes)
    committed = sorted(o for o in outcomes if isinstance(o, int))
    assert committed == list(range(1, head + 1))  # every acknowledged write was in the log it deleted
    assert all(isinstance(o, int | NotFoundError) for o in outcomes)
    await client.create_execution("x", initial_state={})  # nothing of the old one leaks into the new one
    assert [e async for e in client.history("x")] == []


async def test_only_the_executions_a_credential_may_read_are_listed_and_only_admins_delete(db_path: Path) -> None:
    store = SqliteCredentialStore(db_path)
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store, auth=Mode.REQUIRED)
    address = f"127.0.0.1:{running.port}"
    try:
        root = await credentials.issue(store, "root", ["*"], rights=set(Right))
        reader = await credentials.issue(store, "reader", ["order-*"], rights={Right.READ})
        async with StateClient(address, token=root.token) as admin:
            for execution_id in ("order-1", "other", "order-2"):
                await admin.create_execution(execution_id)
        async with StateClient(address, token=reader.token) as client:
            assert [s.execution_id async for s in client.executions()] == ["order-1", "order-2"]
            with pytest.raises(PermissionDeniedError, match="may not admin"):
                await client.delete_execution("order-1")
        code, out, _ = await skillstate(running, "state", "delete", "other", "--token", root.token)
        assert code == 0 and json.loads(out) == {"deleted": "other", "head_revision": 0}
        code, out, _ = await skillstate(running, "state", "list", "--prefix", "order", "--token", reader.token)
        assert code == 0 and [json.loads(line)["execution_id"] for line in out.splitlines()] == ["order-1", "order-2"]
    finally:
        await running.stop(grace=0)
