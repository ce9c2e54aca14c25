"""Observations: addressed to an agent, a skill or everyone; durable and resumable by sequence."""

from __future__ import annotations

import asyncio
import contextlib

from skillstate.clients import Observation, StateClient

from ..conftest import RestartableServer


async def take(client: StateClient, execution_id: str, agent: str, count: int, **kwargs) -> list[Observation]:
    got = []
    async for observation in client.observations(execution_id, agent, **kwargs):
        got.append(observation)
        if len(got) == count:
            return got
    raise AssertionError("stream ended early")


async def test_routing_by_agent_skill_and_broadcast(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    addresses = ["picker", "skill:shipping", "*", "packer", "skill:billing", "picker"]
    for n, to in enumerate(addresses):
        assert await client.publish_observation(execution_id, to, {"n": n}, source="env", kind="event") == n + 1
    picker = await take(client, execution_id, "picker", 4, skills=["shipping"])
    assert [(o.sequence, o.to, o.payload) for o in picker] == [
        (1, "picker", {"n": 0}),
        (2, "skill:shipping", {"n": 1}),
        (3, "*", {"n": 2}),
        (6, "picker", {"n": 5}),
    ]
    packer = await take(client, execution_id, "packer", 2)
    assert [o.sequence for o in packer] == [3, 4]


async def test_live_delivery_and_resume_after_a_sequence(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    async with contextlib.aclosing(client.observations(execution_id, "a")) as stream:
        await client.publish_observation(execution_id, "a", 0)
        got = [await anext(stream)]  # read from the log: the stream is open, and what follows arrives live
        for n in (1, 2):
            await client.publish_observation(execution_id, "a", n)
            got.append(await asyncio.wait_for(anext(stream), 10))
    assert [o.payload for o in got] == [0, 1, 2]
    assert [o.payload for o in await take(client, execution_id, "a", 1, after_sequence=2)] == [2]


async def test_observations_survive_a_restart(restartable: RestartableServer) -> None:
    async with StateClient(restartable.address) as client:
        execution_id = (await client.create_execution()).execution_id
        await client.publish_observation(execution_id, "*", "before", kind="boot")
    await restartable.stop()
    await restartable.start()
    async with StateClient(restartable.address) as client:
        assert await client.publish_observation(execution_id, "*", "after") == 2
        got = await take(client, execution_id, "anyone", 2)
        assert [(o.payload, o.kind) for o in got] == [("before", "boot"), ("after", "")]
