"""Fair admission: the order in which waiting calls get seats, checked directly (no timings)."""

from __future__ import annotations

import asyncio

import pytest

from skillstate.server.auth.fairness import FairQueue


async def settle() -> None:
    """Let every task that can run, run (the queue grants seats synchronously, callers resume after)."""
    for _ in range(10):
        await asyncio.sleep(0)


class Calls:
    """Calls through one queue, each holding its seat until the test releases it; records grant order."""

    def __init__(self, queue: FairQueue) -> None:
        self.queue = queue
        self.granted: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, identity: str, name: str) -> None:
        self._release[name] = asyncio.Event()

        async def call() -> None:
            async with self.queue.seat(identity):
                self.granted.append(name)
                await self._release[name].wait()

        self.tasks[name] = asyncio.ensure_future(call())

    async def finish(self, name: str) -> None:
        self._release[name].set()
        await asyncio.wait_for(self.tasks[name], 5)
        await settle()


async def test_a_quiet_identitys_call_goes_before_the_flooders_queued_ones() -> None:
    calls = Calls(FairQueue(seats=2))
    for i in range(6):
        calls.start("flooder", f"f{i}")
    await settle()
    calls.start("quiet", "q0")
    await settle()
    assert calls.granted == ["f0", "f1"]  # the seats are taken; f2-f5 and q0 wait
    await calls.finish("f0")
    assert calls.granted == ["f0", "f1", "q0"]  # the identity holding no seat goes first
    await calls.finish("f1")
    await calls.finish("q0")
    assert calls.granted == ["f0", "f1", "q0", "f2", "f3"]
    for name in ("f2", "f3", "f4", "f5"):
        await calls.finish(name)
    assert calls.granted == ["f0", "f1", "q0", "f2", "f3", "f4", "f5"]


async def test_identities_holding_as_many_seats_take_turns() -> None:
    calls = Calls(FairQueue(seats=1))
    calls.start("a", "a0")
    await settle()
    for i in range(1, 4):
        calls.start("a", f"a{i}")
        calls.start("b", f"b{i}")
    await settle()
    for name in ("a0", "a1", "b1", "a2", "b2", "a3", "b3"):
        await calls.finish(name)
    assert calls.granted == ["a0", "a1", "b1", "a2", "b2", "a3", "b3"]


async def test_a_call_that_goes_away_while_waiting_gives_up_its_place() -> None:
    queue = FairQueue(seats=1)
    calls = Calls(queue)
    calls.start("a", "a0")
    calls.start("b", "b0")
    calls.start("c", "c0")
    await settle()
    calls.tasks["b0"].cancel()
    await settle()
    assert queue.waiting("b") == 0
    await calls.finish("a0")
    assert calls.granted == ["a0", "c0"]
    await calls.finish("c0")
    assert queue.busy == 0


async def test_a_call_cancelled_just_before_a_seat_frees_is_passed_over_cleanly() -> None:
    """Found in review: the seat's holder cancels a waiting call and leaves in the same step, so the grant
    passes over the cancelled call before it resumes; its clean-up then found itself gone from the queue
    and raised ValueError instead of CancelledError."""
    queue = FairQueue(seats=1)
    calls = Calls(queue)
    leave = asyncio.Event()

    async def holder() -> None:
        async with queue.seat("a"):
            await leave.wait()
            calls.tasks["b0"].cancel()  # and leave the seat before b0 runs again

    holding = asyncio.ensure_future(holder())
    await settle()
    for name in ("b0", "b1", "b2"):
        calls.start("b", name)
    await settle()
    leave.set()
    await settle()
    await holding
    with pytest.raises(asyncio.CancelledError):
        await calls.tasks["b0"]
    assert calls.granted == ["b1"] and queue.waiting("b") == 1
    await calls.finish("b1")
    await calls.finish("b2")
    assert queue.busy == 0 and queue.waiting("b") == 0


async def test_a_streamed_message_waits_its_turn_without_keeping_a_seat() -> None:
    queue = FairQueue(seats=2)
    calls = Calls(queue)
    for i in range(3):
        calls.start("flooder", f"f{i}")
    await settle()
    message = asyncio.ensure_future(queue.turn("watcher"))
    await settle()
    assert not message.done() and calls.granted == ["f0", "f1"]
    await calls.finish("f0")
    assert message.done(), "the watcher holds no seat: its turn comes before the flooder's next call"
    assert calls.granted == ["f0", "f1", "f2"] and queue.busy == 2, "and it gave the seat straight back"
    await calls.finish("f1")
    await calls.finish("f2")
    assert queue.busy == 0


def test_there_is_at_least_one_seat() -> None:
    with pytest.raises(ValueError, match="seats: must be >= 1"):
        FairQueue(seats=0)
