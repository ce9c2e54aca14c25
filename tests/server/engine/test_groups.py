"""Consumer groups without sockets: who holds what, what a late or foreign acknowledgement does, what a member
whose delivery was taken back still finds in its inbox, and what happens when the group cannot read on."""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing

import pytest

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.groups import ConsumerGroup
from skillstate.server.engine.observations import GroupOptions
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import LimitExceededError, StorageError
from skillstate.server.storage.records import ObservationRecord
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...waiting import eventually


def record(sequence: int) -> ObservationRecord:
    return ObservationRecord("x", sequence, "skill:s", "", "", "null", 0.0)


def group(deadline: float = 60.0) -> ConsumerGroup:
    return ConsumerGroup("x", "g", frozenset({"skill:s", "*"}), deadline, 1, on_idle=lambda g: None)


async def test_a_late_ack_shows_its_member_alive_and_leaves_the_new_holders_hold_alone() -> None:
    """Found in review: acks named no member, so a suspected member's late ack released the new holder's
    hold and left the acker suspected, starved of work for good."""
    consumers = group(deadline=0.2)
    a = consumers.join("a")
    consumers.offer(record(1))
    first = await a.inbox.get()
    b = consumers.join("b")
    await eventually(lambda: a.expired, interval=0.001)  # a's ack deadline passes: this wait is what is tested
    assert a.expired == {1} and 1 in b.held and not a.current(first)
    assert consumers.ack([1], "a") == 0, "a handled it late; b holds it now, and keeps it"
    assert 1 in b.held and a.expired == set()
    consumers.offer(record(2))
    assert (await a.inbox.get()).record.sequence == 2, "a is given work again"
    consumers.close()


async def test_a_delivery_taken_back_stays_stale_in_its_old_holders_inbox() -> None:
    consumers = group()
    a, b = consumers.join("a"), consumers.join("b")
    consumers.offer(record(1))
    handed = await a.inbox.get()
    consumers.ack([1], "a", requeue=True)  # a gives it back; b gets it
    again = await b.inbox.get()
    assert (again.count, b.current(again), a.current(handed)) == (2, True, False)
    consumers.leave(b)  # b goes: a gets it back, as a new delivery
    third = await a.inbox.get()
    assert a.current(third) and third is not handed and third.count == 3
    consumers.close()


async def test_a_delivery_given_back_waits_for_another_member_and_others_go_on_past_it() -> None:
    """Found with agents handing events back: given back while the other member was busy, it came straight
    back to its giver, so no other agent ever had it."""
    consumers = group()
    a, b = consumers.join("a"), consumers.join("b")
    consumers.offer(record(1))
    consumers.offer(record(2))
    assert (await a.inbox.get()).record.sequence == 1 and (await b.inbox.get()).record.sequence == 2
    consumers.ack([1], "a", requeue=True)  # b is busy (max_unacked 1): 1 waits for it, not for a
    consumers.offer(record(3))
    assert (await a.inbox.get()).record.sequence == 3, "what a did not give back still goes to a"
    consumers.ack([2], "b")
    again = await b.inbox.get()
    assert (again.record.sequence, again.count) == (1, 2)
    consumers.close()


async def test_a_delivery_given_back_comes_back_when_no_other_member_is_left() -> None:
    consumers = group(deadline=0.2)
    a = consumers.join("a")
    consumers.offer(record(1))
    await a.inbox.get()
    consumers.ack([1], "a", requeue=True)
    assert (await a.inbox.get()).count == 2, "alone in its group: a gets it again"
    consumers.ack([1], "a")
    b = consumers.join("b")
    consumers.offer(record(2))
    assert (await b.inbox.get()).record.sequence == 2
    await eventually(lambda: b.expired, interval=0.001)  # b stalls: its deadline passes (what is tested)
    taken = await a.inbox.get()
    assert taken.record.sequence == 2, "b's delivery went to a"
    consumers.ack([2], "a", requeue=True)
    again = await a.inbox.get()
    assert (again.record.sequence, again.count) == (2, 3), "b is suspected of stalling: a gets it back"
    consumers.close()


class FailingLog(MemoryRevisionLog):
    """A log whose observations stop being readable when the test says."""

    failing = False

    async def read_observations(self, *args: object, **kwargs: object) -> list:
        if self.failing:
            raise StorageError("disk gone (injected)")
        return await super().read_observations(*args, **kwargs)  # type: ignore[arg-type]


async def test_a_group_that_cannot_read_on_ends_every_members_stream_with_why() -> None:
    log = FailingLog()
    engine = StateEngine(log)
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        await engine.publish_observation("x", "skill:s", "", "", json.dumps("before"))
        log.failing = True  # the group's first read of the log, to catch up, fails
        with pytest.raises(StorageError, match="disk gone"):
            async with aclosing(engine.group_observations("x", "m", ["s"], 0, GroupOptions("g"))) as stream:
                await asyncio.wait_for(anext(stream), 10)
        log.failing = False
        async with aclosing(engine.group_observations("x", "m", ["s"], 0, GroupOptions("g"))) as stream:
            observation, delivery = await asyncio.wait_for(anext(stream), 10)
        assert (observation.payload_json, delivery) == ('"before"', 1), "a new group was made, and reads again"
    finally:
        await engine.close()


async def test_a_group_over_the_stream_limit_is_refused_to_its_first_member() -> None:
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(max_watchers=1))
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        with pytest.raises(LimitExceededError, match="observation streams"):
            async with aclosing(engine.group_observations("x", "m", ["s"], 0, GroupOptions("g"))) as stream:
                await asyncio.wait_for(anext(stream), 10)
    finally:
        await engine.close()
