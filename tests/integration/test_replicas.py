"""Several `skillstate serve` replicas on one PostgreSQL database, each a subprocess on its own port: any
replica takes any call, commits to one execution are serialized by the database, and every replica's
readers and watchers see what any replica committed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from skillstate.clients import NotFoundError, RevisionEvent, StateClient

from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures
from ..waiting import eventually
from .test_crash import start_server_process

COUNTER = {"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}


@pytest.fixture
async def replicas(postgres_url: str) -> AsyncIterator[list[str]]:  # noqa: F811
    started = [await start_server_process(postgres_url) for _ in range(3)]  # type: ignore[arg-type]
    yield [f"127.0.0.1:{port}" for _, port in started]
    for process, _ in started:
        process.terminate()
        await process.wait()


async def test_any_replica_serves_what_another_created_and_wrote(replicas: list[str]) -> None:
    a, b, c = (StateClient(address) for address in replicas)
    async with a, b, c:
        await a.create_execution("x", schema=COUNTER, initial_state={"n": 0})
        first = await a.submit_patch("x", {"n": 1}, agent_id="w", base_revision=0)
        seen = await b.get_state("x")  # created and written elsewhere: found, and not stale
        assert (seen.revision, seen.state, seen.state_hash) == (1, {"n": 1}, first.state_hash)
        second = await c.submit_patch("x", {"n": 2}, agent_id="w", base_revision=1)  # a base read on another
        assert second.revision == 2 and (await a.get_state("x")).state == {"n": 2}
        assert [event.revision async for event in b.history("x")] == [1, 2]


async def test_concurrent_writers_on_every_replica_lose_nothing(replicas: list[str]) -> None:
    clients = [StateClient(address) for address in replicas]
    async with clients[0], clients[1], clients[2]:
        await clients[0].create_execution("hot", schema=COUNTER, initial_state={"n": 0})

        async def writer(w: int) -> list[int]:
            client = clients[w % 3]
            return [
                (await client.submit_patch("hot", {"n": 1}, agent_id=f"w{w}", base_revision=0)).revision
                for _ in range(25)
            ]

        revisions = [r for rs in await asyncio.gather(*(writer(w) for w in range(9))) for r in rs]
        assert sorted(revisions) == list(range(1, 226)), "each acknowledged write is its own revision"
        states = [await client.get_state("hot") for client in clients]
        assert {(s.revision, s.state["n"], s.state_hash) for s in states} == {(225, 225, states[0].state_hash)}
        logs = [[(e.revision, e.state_hash) async for e in client.history("hot")] for client in clients]
        assert logs[0] == logs[1] == logs[2] and len(logs[0]) == 225


async def test_watchers_on_one_replica_see_commits_through_all(replicas: list[str]) -> None:
    a, b, c = (StateClient(address) for address in replicas)
    async with a, b, c:
        await a.create_execution("w", schema=COUNTER, initial_state={"n": 0})
        await a.submit_patch("w", {"n": 1}, agent_id="w", base_revision=0)
        received: list[int] = []

        async def watch() -> None:
            async for event in b.watch("w", 0):
                assert isinstance(event, RevisionEvent)
                received.append(event.revision)
                if event.revision == 30:
                    return

        watching = asyncio.create_task(watch())
        await eventually(lambda: received)  # b has sent revision 1: it is watching, and the rest arrive live
        for i in range(1, 30):
            await (a if i % 2 else c).submit_patch("w", {"n": 1}, agent_id="w", base_revision=0)
        await asyncio.wait_for(watching, 10)
        assert received == list(range(1, 31))


async def test_an_execution_deleted_on_one_replica_is_gone_from_all(replicas: list[str]) -> None:
    a, b, c = (StateClient(address) for address in replicas)
    async with a, b, c:
        await a.create_execution("d", schema=COUNTER, initial_state={"n": 0})
        await a.submit_patch("d", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k1")
        received: list[int] = []

        async def watch() -> None:
            async for event in b.watch("d", 0, resume=False):
                received.append(event.revision)

        watching = asyncio.create_task(watch())
        await eventually(lambda: received)  # b holds the execution, and streams it
        assert (await c.get_state("d")).revision == 1  # so does c
        assert await a.delete_execution("d") == 1
        with pytest.raises(NotFoundError):
            await asyncio.wait_for(watching, 10)  # b heard, and ended its watcher
        for replica in (b, c):
            with pytest.raises(NotFoundError):
                await replica.get_state("d")
        await c.create_execution("d", schema=COUNTER, initial_state={"n": 10})  # fresh, wherever made
        again = await b.submit_patch("d", {"n": 11}, agent_id="w", base_revision=0, client_patch_id="k1")
        assert (again.revision, again.duplicate) == (1, False)
        assert (await a.get_state("d")).state == {"n": 11}


async def test_a_retry_on_another_replica_is_recognized(replicas: list[str]) -> None:
    a, b, _ = (StateClient(address) for address in replicas)
    async with a, b:
        await a.create_execution("i", schema=COUNTER, initial_state={"n": 0})
        original = await a.submit_patch("i", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k1")
        retried = await b.submit_patch("i", {"n": 1}, agent_id="w", base_revision=0, client_patch_id="k1")
        assert retried.duplicate and retried.revision == original.revision
        assert (await b.get_state("i")).state == {"n": 1}


async def test_observations_cross_replicas(replicas: list[str]) -> None:
    a, b, c = (StateClient(address) for address in replicas)
    async with a, b, c:
        await a.create_execution("o")
        stream = c.observations("o", "agent")
        sequences = [await b.publish_observation("o", "agent", {"i": 0})]
        got = [await asyncio.wait_for(anext(stream), 10)]  # c has sent the first: it holds the stream
        sequences += [await (a if i % 2 else b).publish_observation("o", "agent", {"i": i}) for i in range(1, 6)]
        assert sorted(sequences) == list(range(1, 7))
        got += [await asyncio.wait_for(anext(stream), 10) for _ in range(5)]
        assert [o.sequence for o in got] == list(range(1, 7)) and [o.payload for o in got] == [
            {"i": i} for i in range(6)
        ]


async def test_skills_registered_on_one_replica_are_served_by_all(replicas: list[str]) -> None:
    from skillstate.clients import NotFoundError, SkillRegistryClient

    from .test_skill_registry import package

    a, b = SkillRegistryClient(replicas[0]), SkillRegistryClient(replicas[1])
    async with a, b:
        assert [s async for s in b.list_skills()] == []  # b has looked at the library before a registers
        await a.register_skill(package("ship-order"))

        async def served() -> Any:
            with contextlib.suppress(NotFoundError):
                return await b.get_skill("ship-order")

        found = await eventually(served, timeout=5)  # within a second or so
        assert found.summary.name == "ship-order"
        assert (await b.hydrate("ship an order", budget_tokens=1000)).sections
        await a.remove_skill("ship-order")

        async def forgotten() -> bool:
            return not [s async for s in b.list_skills()]

        await eventually(forgotten, timeout=5)
