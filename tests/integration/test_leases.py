"""One owner per execution across `skillstate serve` replicas on one PostgreSQL database: a call to any
replica is served by the owner (forwarded as the caller's own, with its identity and rights), and when the
owner dies, stalls past its lease or shuts down, another replica takes the execution over from the log with
no acknowledged write lost and none committed twice."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.request
from collections.abc import AsyncIterator

import asyncpg
import pytest

from skillstate.clients import PermissionDeniedError, StateClient, UnauthenticatedError
from skillstate.clients._channel import open_channel
from skillstate.server.auth import credentials
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.postgres import PostgresCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures
from .test_crash import start_server_process

COUNTER = {"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}


async def replica(url: str, *flags: str) -> tuple[asyncio.subprocess.Process, str]:
    process, port = await start_server_process(url, *flags)
    return process, f"127.0.0.1:{port}"


async def two_replicas(
    url: str, processes: list[asyncio.subprocess.Process], lease_seconds: str = "1"
) -> tuple[asyncio.subprocess.Process, str, asyncio.subprocess.Process, str]:
    """Replicas a and b (killed at the end of the test), and where each is called."""
    (a, at_a), (b, at_b) = [await replica(url, "--lease-seconds", lease_seconds) for _ in range(2)]
    processes += [a, b]
    return a, at_a, b, at_b


@pytest.fixture
async def processes() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    started: list[asyncio.subprocess.Process] = []
    yield started
    for process in started:
        if process.returncode is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            await process.wait()


async def scrape(server: RunningServer) -> str:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as reply:
            return str(reply.read().decode())

    return await asyncio.to_thread(get)


async def owner_of(url: str, execution_id: str) -> str:
    dsn, _, schema = url.partition("?search_path=")
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        return str(await connection.fetchval("SELECT owner FROM leases WHERE execution_id = $1", execution_id))
    finally:
        await connection.close()


async def history(client: StateClient, execution_id: str) -> list[tuple[int, str, str]]:
    return [(e.revision, e.state_hash, e.client_patch_id) async for e in client.history(execution_id)]


async def test_the_owner_dies_and_another_replica_takes_over_losing_nothing(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, _, at_b = await two_replicas(postgres_url, processes)
    async with StateClient(at_a) as on_a, StateClient(at_b) as on_b:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})  # a owns it
        owner = await owner_of(postgres_url, "x")
        acknowledged = [await on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0) for _ in range(5)]
        assert await owner_of(postgres_url, "x") == owner, "b forwarded its writes to the owner"
        a.kill()
        await a.wait()
        killed = time.monotonic()
        acknowledged.append(await on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0))
        assert time.monotonic() - killed < 10
        assert await owner_of(postgres_url, "x") != owner, "b took the execution over"
        logged = await history(on_b, "x")
        assert [(r.revision, r.state_hash) for r in acknowledged] == [(n, h) for n, h, _ in logged]
        assert (await on_b.get_state("x")).state == {"n": 6}


async def test_a_session_and_a_watch_through_another_replica_go_on_when_the_owner_dies(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, _b, at_b = await two_replicas(postgres_url, processes)
    async with StateClient(at_a) as on_a, StateClient(at_b) as on_b:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        seen: list[int] = []

        async def watch() -> None:
            async for event in on_b.watch("x", 0):  # forwarded to a, then resumed through b's takeover
                seen.append(event.revision)
                if event.revision == 6:
                    return

        watching = asyncio.create_task(watch())
        async with on_b.session("x", agent_id="w", receive_observations=False) as session:
            first = [await session.submit({"n": 1}, base_revision=0) for _ in range(3)]
            a.kill()
            await a.wait()
            after = [await session.submit({"n": 1}, base_revision=0) for _ in range(3)]
        await asyncio.wait_for(watching, 30)
        assert [r.revision for r in first + after] == seen == [1, 2, 3, 4, 5, 6]
        assert (await on_b.get_state("x")).state == {"n": 6}
        assert [n for n, _, _ in await history(on_b, "x")] == seen


async def test_an_owner_paused_past_its_lease_is_taken_over_and_forwards_once_it_wakes(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, _b, at_b = await two_replicas(postgres_url, processes)
    async with StateClient(at_a) as on_a, StateClient(at_b) as on_b:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        await on_a.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k1")
        os.kill(a.pid, signal.SIGSTOP)  # a holds x, and stops answering
        try:
            second = await on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k2")
        finally:
            os.kill(a.pid, signal.SIGCONT)
        assert second.revision == 2
        # a wakes up thinking it owns x: it finds it lost the lease before it serves anything of x
        assert (await on_a.get_state("x")).revision == 2
        third = await on_a.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k3")
        assert third.revision == 3
        assert await history(on_a, "x") == await history(on_b, "x")
        assert [key for _, _, key in await history(on_b, "x")] == ["k1", "k2", "k3"]
        assert (await on_a.get_state("x")).state == (await on_b.get_state("x")).state == {"n": 3}


async def test_a_replica_shutting_down_hands_its_executions_over_without_waiting_for_its_lease(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, _b, at_b = await two_replicas(postgres_url, processes, lease_seconds="60")
    async with StateClient(at_a) as on_a, StateClient(at_b) as on_b:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        await on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0)
        owner = await owner_of(postgres_url, "x")
        a.terminate()
        assert await a.wait() == 0
        started = time.monotonic()
        after = await on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0)
        assert (
            after.revision == 2 and (await on_b.get_state("x")).state == {"n": 2} and time.monotonic() - started < 10
        )  # not the 60 s of a lease let expire
        assert await owner_of(postgres_url, "x") != owner


@pytest.fixture
async def secured_pair(
    postgres_schema: tuple[str, str],  # noqa: F811
) -> AsyncIterator[tuple[RunningServer, RunningServer, str]]:
    """Two replicas requiring credentials, and the database URL of their schema."""
    dsn, schema = postgres_schema
    servers = []
    for _ in range(2):
        log, store = PostgresRevisionLog(dsn, schema=schema), PostgresCredentialStore(dsn, schema=schema)
        servers.append(await start_server(log, "127.0.0.1:0", credentials=store, auth=Mode.REQUIRED))
    yield servers[0], servers[1], f"{dsn}?search_path={schema}"
    for server in servers:
        await server.stop(grace=0)


async def test_a_forwarded_call_is_checked_as_the_original_callers(
    secured_pair: tuple[RunningServer, RunningServer, str],
) -> None:
    owner, other, url = secured_pair
    store = owner.credentials
    admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
    write = {Right.READ, Right.WRITE}
    ada, cy = [await credentials.issue(store, name, ["x"], rights=write) for name in ("ada", "cy")]
    reader = await credentials.issue(store, "rea", ["x"], rights={Right.READ})
    schema = {"type": "object", "properties": {"n": {"type": "integer", "x-owner": "ada"}, "m": {"type": "integer"}}}
    async with StateClient(channel=open_channel(f"127.0.0.1:{owner.port}", token=admin.token)) as root:
        await root.create_execution("x", schema=schema, initial_state={"n": 0, "m": 0})

    def on_other(token: str | None) -> StateClient:
        return StateClient(channel=open_channel(f"127.0.0.1:{other.port}", token=token))

    async with on_other(ada.token) as as_ada, on_other(cy.token) as as_cy:
        written = await as_ada.submit_patch("x", {"n": 1}, agent_id="ada", base_revision=0)
        with pytest.raises(PermissionDeniedError, match="owned by ada"):  # the owner's check, on cy's identity
            await as_cy.submit_patch("x", {"n": 2}, agent_id="cy", base_revision=1)
        with pytest.raises(PermissionDeniedError, match="ada"):  # claiming another's name: the guard here refuses
            await as_cy.submit_patch("x", {"m": 2}, agent_id="ada", base_revision=1)
        await as_cy.submit_patch("x", {"m": 2}, agent_id="cy", base_revision=1)
        events = [(e.agent_id, e.applied_patch) async for e in as_cy.history("x")]
        assert events == [("ada", {"n": 1}), ("cy", {"m": 2})] and written.revision == 1
    async with on_other(reader.token) as as_reader, on_other(None) as anonymous:
        with pytest.raises(PermissionDeniedError):
            await as_reader.submit_patch("x", {"m": 3}, agent_id="rea", base_revision=2)
        with pytest.raises(UnauthenticatedError):
            await anonymous.get_state("x")
        assert (await as_reader.get_state("x")).state == {"n": 1, "m": 2}
    assert await owner_of(url, "x") == owner.engine.replica_id != other.engine.replica_id  # served by the owner


async def test_a_client_that_follows_owners_calls_the_owner_directly_and_finds_the_next_one(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, b, at_b = await two_replicas(postgres_url, processes)
    async with StateClient(at_a) as on_a, StateClient(at_b, follow_owners=True) as following:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        seen: list[int] = []

        async def watch() -> None:
            async for event in following.watch("x", 0):
                seen.append(event.revision)
                if event.revision == 4:
                    return

        watching = asyncio.create_task(watch())
        assert (await following.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0)).revision == 1
        os.kill(b.pid, signal.SIGSTOP)  # the client's own target stops answering: it calls the owner itself
        try:
            async with following.session("x", agent_id="w", receive_observations=False) as session:
                assert (await session.submit({"n": 1}, base_revision=0)).revision == 2
            assert (await asyncio.wait_for(following.get_state("x"), 5)).state == {"n": 2}
        finally:
            os.kill(b.pid, signal.SIGCONT)
        a.kill()
        await a.wait()
        results = [await following.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0) for _ in range(2)]
        assert [r.revision for r in results] == [3, 4]  # b took x over; the client found it through b
        await asyncio.wait_for(watching, 30)
        assert seen == [1, 2, 3, 4]


async def test_replicas_forwarding_to_each_other_hold_no_seat_while_they_wait(
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    """Every call to each replica is for the other's execution: with seats held while forwarding, each
    replica's seats would all wait for a seat at the other."""
    dsn, schema = postgres_schema
    servers = [
        await start_server(
            PostgresRevisionLog(dsn, schema=schema), "127.0.0.1:0", seats=2, metrics_listen="127.0.0.1:0"
        )
        for _ in range(2)
    ]
    try:
        clients = [StateClient(f"127.0.0.1:{server.port}") for server in servers]
        async with clients[0] as on_a, clients[1] as on_b:
            await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
            await on_b.create_execution("y", schema=COUNTER, initial_state={"n": 0})
            calls = [on_b.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0) for _ in range(50)]
            calls += [on_a.submit_patch("y", {"n": 1}, agent_id="w", base_revision=0) for _ in range(50)]
            results = await asyncio.wait_for(asyncio.gather(*calls), 30)
            assert sorted(r.revision for r in results) == sorted([*range(1, 51), *range(1, 51)])
        for server in servers:  # each forwarded its 50 calls (and the other's create was its own)
            assert 'skillstate_rpc_forwarded_total{method="SubmitPatch"} 50.0' in await scrape(server)
    finally:
        for server in servers:
            await server.stop(grace=0)


async def test_a_client_following_owners_rides_out_a_crash_of_the_owner_at_the_default_lease(
    postgres_url: str,  # noqa: F811
    processes: list[asyncio.subprocess.Process],
) -> None:
    a, at_a, _b, at_b = await two_replicas(postgres_url, processes, lease_seconds="3")
    async with StateClient(at_a) as on_a, StateClient(at_b, follow_owners=True) as following:
        await on_a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        assert await following.publish_observation("x", "*", {"t": 1}) == 1  # never retried, yet redirected
        a.kill()
        await a.wait()
        # the owner named by b until its lease expires cannot be reached: the client waits on b, which takes x
        assert (await following.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0)).revision == 1
        assert await following.publish_observation("x", "*", {"t": 2}) == 2
