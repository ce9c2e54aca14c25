"""Consumer groups through a real server: each observation to one member, acknowledged, redelivered when
its member's stream ends or its ack deadline passes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from skillstate.clients import NotFoundError, Observation, StateClient, ValidationError

from ..waiting import eventually


class Member:
    """One group member's stream, read by a task into a queue the test takes from."""

    def __init__(self, client: StateClient, execution_id: str, agent: str, **options: object) -> None:
        self.client, self.execution_id, self.agent = client, execution_id, agent
        self.received: asyncio.Queue[Observation] = asyncio.Queue()
        self._stream: AsyncIterator[Observation] = client.observations(
            execution_id,
            agent,
            skills=["s"],
            group="g",
            **options,  # type: ignore[arg-type]
        )
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async with contextlib.aclosing(self._stream) as stream:  # type: ignore[type-var]
            async for observation in stream:
                await self.received.put(observation)

    async def next(self) -> Observation:
        return await asyncio.wait_for(self.received.get(), 10)

    def nothing_yet(self) -> bool:
        return self.received.empty()

    async def ack(self, sequences: list[int], *, requeue: bool = False) -> int:
        return await self.client.ack_observations(
            self.execution_id, "g", sequences, agent_id=self.agent, requeue=requeue
        )

    async def leave(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def first_members(client: StateClient, execution_id: str, count: int, **options: object) -> list[Member]:
    """`count` members, each proved to have joined by an observation addressed to its own agent id."""
    members = []
    for i in range(count):
        member = Member(client, execution_id, f"m{i}", **options)
        await client.publish_observation(execution_id, f"m{i}", "hello")
        assert (await member.next()).payload == "hello"
        members.append(member)
    return members


async def test_each_observation_goes_to_one_member_and_is_done_once_acknowledged(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    members = await first_members(client, execution_id, 3)
    reads: dict[asyncio.Future[Observation], Member] = {}
    try:
        for n in range(30):
            await client.publish_observation(execution_id, "skill:s", n)
        seen: dict[int, str] = {}
        while len(seen) < 30:  # a member holds one at a time (max_unacked 0: one): each acks to get the next
            for member in set(members) - set(reads.values()):  # one read outstanding per member, never
                reads[asyncio.ensure_future(member.next())] = member  # cancelled: that could lose what it got
            done, _ = await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
            for read in done:
                member = reads.pop(read)
                observation = read.result()
                assert observation.delivery == 1 and observation.payload not in seen
                seen[observation.payload] = member.agent  # type: ignore[index]
                assert await member.ack([observation.sequence]) == 1
        assert sorted(seen) == list(range(30))
        assert len(set(seen.values())) == 3, "the work was shared"
        assert await members[0].ack([2, 3]) == 0, "acknowledging again changes nothing"
    finally:
        for read in reads:
            read.cancel()
        for member in members:
            await member.leave()


async def test_a_member_holds_at_most_its_limit_and_the_least_loaded_gets_the_next(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    a, b = await first_members(client, execution_id, 2, max_unacked=2)
    try:
        for n in range(5):
            await client.publish_observation(execution_id, "skill:s", n)
        got = [await a.next(), await b.next(), await a.next(), await b.next()]
        assert [o.payload for o in got] == [0, 1, 2, 3], "in turn, two each"
        await eventually(lambda: a.nothing_yet() and b.nothing_yet())
        await b.ack([got[1].sequence])  # b now holds fewer
        assert (await b.next()).payload == 4
    finally:
        await a.leave()
        await b.leave()


async def test_what_a_member_held_goes_to_another_when_its_stream_ends(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    a, b = await first_members(client, execution_id, 2)
    try:
        await client.publish_observation(execution_id, "skill:s", "first")
        await client.publish_observation(execution_id, "skill:s", "second")
        held_by_a, held_by_b = await a.next(), await b.next()
        assert (held_by_a.payload, held_by_b.payload) == ("first", "second")
        await b.ack([held_by_b.sequence])
        await a.leave()  # it dies holding "first", unacknowledged
        again = await b.next()
        assert (again.sequence, again.payload, again.delivery) == (held_by_a.sequence, "first", 2)
    finally:
        await b.leave()


async def test_an_observation_past_its_ack_deadline_goes_to_another_member_and_its_holder_waits(
    client: StateClient,
) -> None:
    execution_id = (await client.create_execution()).execution_id
    staller, worker = await first_members(client, execution_id, 2, ack_deadline=1.0)
    try:
        await client.publish_observation(execution_id, "skill:s", "stalled on")
        taken = await staller.next()
        await client.publish_observation(execution_id, "skill:s", "next")
        assert (await worker.next()).payload == "next"  # the worker was free; the staller held one
        await worker.ack([taken.sequence + 1])
        redelivered = await worker.next()  # the deadline passes (this wait is what is tested)
        assert (redelivered.payload, redelivered.delivery) == ("stalled on", 2)
        await worker.ack([redelivered.sequence])
        await client.publish_observation(execution_id, "skill:s", "more")
        more = await worker.next()
        assert more.payload == "more", "the staller gets nothing new until it acknowledges"
        assert staller.nothing_yet()
        assert await staller.ack([taken.sequence]) == 0, "handled late: the worker had it by then"
        await worker.ack([more.sequence])
        await client.publish_observation(execution_id, "skill:s", "after")
        await client.publish_observation(execution_id, "skill:s", "and after")
        assert {(await staller.next()).payload, (await worker.next()).payload} == {"after", "and after"}, (
            "an acknowledgement shows the staller alive: it gets work again"
        )
    finally:
        await staller.leave()
        await worker.leave()


async def test_a_member_still_gets_what_is_addressed_to_it_and_groups_are_checked(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    (member,) = await first_members(client, execution_id, 1)
    try:
        await client.publish_observation(execution_id, "m0", "just for m0")
        await client.publish_observation(execution_id, "*", "for everyone")
        direct, shared = await member.next(), await member.next()
        assert (direct.payload, direct.delivery) == ("just for m0", 0)
        assert (shared.payload, shared.delivery) == ("for everyone", 1)
        other = client.observations(execution_id, "x", skills=["t"], group="g")
        with pytest.raises(ValidationError, match=r"consumer group 'g' reads \['s'\]; this stream asked for \['t'\]"):
            await anext(other)
        with pytest.raises(NotFoundError, match="has no consumer group 'nope'"):
            await client.ack_observations(execution_id, "nope", [1], agent_id="m0")
    finally:
        await member.leave()


async def test_an_observation_given_back_goes_to_another_member_at_once(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    a, b = await first_members(client, execution_id, 2)
    try:
        await client.publish_observation(execution_id, "skill:s", "one")
        await client.publish_observation(execution_id, "skill:s", "two")
        first, second = await a.next(), await b.next()
        await b.ack([second.sequence])
        assert await a.ack([first.sequence], requeue=True) == 1
        again = await b.next()  # b, not a, although a is free too: it gave the observation back
        assert (again.sequence, again.delivery) == (first.sequence, 2)
        assert await a.ack([again.sequence]) == 0, "only its holder releases a delivery"
        await b.ack([again.sequence])
        await client.publish_observation(execution_id, "skill:s", "three")
        assert (await a.next()).payload == "three", "giving back is not stalling: a gets new work"
    finally:
        await a.leave()
        await b.leave()
