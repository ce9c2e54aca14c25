"""The registry's heavy work runs in its worker: the event loop keeps answering while a hydration or a
registration is parked there, and a reader never sees the library half-changed (the readers-writer lock)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from bench.synthetic import generate_library
from skillstate.server.skills.readwrite import ReadWriteLock
from skillstate.server.skills.registry import SkillRegistry
from skillstate.server.storage.skill_store.memory import MemorySkillStore


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_the_loop_keeps_answering_while_a_hydration_is_parked_in_the_worker() -> None:
    worker = concurrent.futures.ThreadPoolExecutor(1)
    registry = SkillRegistry(MemorySkillStore(), worker=worker)
    await registry.start()
    try:
        for skill in generate_library(5, seed=3):
            await registry.register(skill.files, skill.folder)
        gate = threading.Event()
        worker.submit(gate.wait)  # the worker is busy until the test opens the gate
        hydrating = asyncio.ensure_future(registry.hydrate("reconcile the invoice", 2000))
        for _ in range(50):  # meanwhile the loop serves other calls of the registry
            page, _ = await registry.page()
            assert len(page) == 5
        assert not hydrating.done()
        gate.set()
        hydration = await asyncio.wait_for(hydrating, 30)
        assert hydration.sections
    finally:
        gate.set()
        await registry.close()
        worker.shutdown()


async def test_readers_share_the_lock_and_a_writer_waits_for_them_then_goes_before_later_readers() -> None:
    lock = ReadWriteLock()
    order: list[str] = []
    release = {name: asyncio.Event() for name in ("r1", "r2", "w", "r3")}

    async def reader(name: str) -> None:
        async with lock.read():
            order.append(f"{name} in")
            await release[name].wait()
        order.append(f"{name} out")

    async def writer() -> None:
        async with lock.write():
            order.append("w in")
            await release["w"].wait()
        order.append("w out")

    tasks = [asyncio.ensure_future(reader("r1")), asyncio.ensure_future(reader("r2"))]
    await settle()
    tasks.append(asyncio.ensure_future(writer()))
    await settle()
    tasks.append(asyncio.ensure_future(reader("r3")))  # arrives after the waiting writer: goes after it
    await settle()
    assert order == ["r1 in", "r2 in"]
    release["r1"].set()
    release["r2"].set()
    await settle()
    assert order == ["r1 in", "r2 in", "r1 out", "r2 out", "w in"]
    release["w"].set()
    release["r3"].set()
    await asyncio.gather(*tasks)
    assert order[5:] == ["w out", "r3 in", "r3 out"]


async def test_a_writer_that_goes_away_while_waiting_lets_the_readers_behind_it_in() -> None:
    lock = ReadWriteLock()
    entered = asyncio.Event()
    release = asyncio.Event()

    async def hold_read() -> None:
        async with lock.read():
            entered.set()
            await release.wait()

    holder = asyncio.ensure_future(hold_read())
    await entered.wait()

    async def write() -> None:
        async with lock.write():
            raise AssertionError("the writer was cancelled before it got the lock")

    writer = asyncio.ensure_future(write())
    await settle()
    late_reader_in = asyncio.Event()

    async def late_reader() -> None:
        async with lock.read():
            late_reader_in.set()

    late = asyncio.ensure_future(late_reader())
    await settle()
    assert not late_reader_in.is_set()  # held back for the waiting writer
    writer.cancel()
    await asyncio.wait_for(late_reader_in.wait(), 5)
    release.set()
    await asyncio.gather(holder, late)
