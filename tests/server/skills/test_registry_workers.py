"""The registry's heavy work runs in worker threads: the event loop keeps answering while a hydration is
parked there, and readers work over a published snapshot, so a registration parked in the middle of its
macro maintenance (in the writer thread) neither holds them up nor shows them any of its change."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from bench.synthetic import generate_library
from skillstate.server.errors import NotFoundError
from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.macro_index import MacroIndex
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


class ParkingWorker(concurrent.futures.ThreadPoolExecutor):
    """One thread. Once armed, the first job to call the given function waits at that call until the gate
    opens: a trace of the job's own thread sees the call, and nothing of the registry is replaced."""

    def __init__(self) -> None:
        super().__init__(1)
        self.parked, self.gate = threading.Event(), threading.Event()
        self.parked_in: object = None
        """The `self` of the parked call."""
        self._at: Any = None

    def park_at(self, function: Callable[..., object]) -> None:
        self._at = function.__code__

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        return super().submit(self._traced, fn, *args, **kwargs)

    def _traced(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        previous = sys.gettrace()
        sys.settrace(self._trace)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.settrace(previous)

    def _trace(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is self._at and not self.parked.is_set():
            self.parked_in = frame.f_locals.get("self")
            self.parked.set()
            self.gate.wait()


async def test_a_hydration_is_answered_while_a_registration_is_parked_mid_maintenance_and_sees_none_of_it() -> None:
    worker, writer = concurrent.futures.ThreadPoolExecutor(1), ParkingWorker()
    registry = SkillRegistry(MemorySkillStore(), worker=worker, writer=writer)
    await registry.start()
    try:
        skills = generate_library(12, seed=3)
        *present, newcomer = skills
        for skill in present:
            await registry.register(skill.files, skill.folder)
        task = newcomer.task.rsplit(" (", 1)[0]
        before = await registry.hydrate(task, 3000)
        stats_before = await registry.stats()
        macros_before = registry.macros

        writer.park_at(MacroIndex._promote)  # after the new skill's runs are indexed and assimilated
        registering = asyncio.ensure_future(registry.register(newcomer.files, newcomer.folder))
        assert await asyncio.wait_for(asyncio.to_thread(writer.parked.wait, 60), 90), "the registration never parked"
        removing = asyncio.ensure_future(registry.remove(present[0].name))

        during = await asyncio.wait_for(registry.hydrate(task, 3000), 30)  # answered while the writer is parked
        assert during == before  # the library as it was before the registration, not part of it
        assert writer.parked_in is not None and writer.parked_in is not macros_before  # maintenance runs on a fork
        assert registry.library.get(newcomer.name) is None
        assert await asyncio.wait_for(registry.stats(), 30) == stats_before
        page, _ = await registry.page()
        assert [view.stored.name for view in page] == sorted(s.name for s in present)
        with pytest.raises(NotFoundError):
            await registry.get(newcomer.name)
        with pytest.raises(NotFoundError):
            await registry.hydrate(task, 3000, [newcomer.name])
        await settle()
        assert not registering.done() and not removing.done()  # writers take turns: the removal waits

        writer.gate.set()
        await asyncio.wait_for(asyncio.gather(registering, removing), 60)
        after = await registry.hydrate(task, 3000)
        assert newcomer.name in after.source_skills and after != before
        page, _ = await registry.page()
        assert [view.stored.name for view in page] == sorted(s.name for s in skills[1:])
        assert registry.macros is not macros_before
    finally:
        writer.gate.set()
        await registry.close()
        worker.shutdown()
        writer.shutdown()


async def test_a_registry_closed_during_its_start_stops_loading_at_the_next_skill(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A start hands the writer several skills at a time; closing stops the hand-over under way at its next
    skill instead of building the rest (a stop would otherwise wait for the whole hop)."""
    from skillstate.server.skills import publisher
    from skillstate.server.skills.package import load_package
    from skillstate.server.storage.records import SkillVersion

    skills = generate_library(8, seed=4)
    monkeypatch.setattr(publisher, "SKILLS_PER_HOP", len(skills))  # all of them in one hop
    store = MemorySkillStore()
    await store.open()
    for skill in skills:
        package = load_package(skill.files, skill.folder)
        await store.add(SkillVersion(package.name, 1, package.digest, package.folder, 1000.0, package.files))
    entered, released, texts = threading.Event(), threading.Event(), []

    def extractor(title: str, text: str, default: Any) -> Any:  # runs in the writer, section by section
        entered.set()
        released.wait(60)  # (bounded: a failing test must not leave the writer, and the session, waiting)
        texts.append(text)
        return default

    writer = concurrent.futures.ThreadPoolExecutor(1)
    registry = SkillRegistry(store, extractor=extractor, writer=writer)
    await registry.start()
    try:
        assert await asyncio.to_thread(entered.wait, 60)  # the hop is under way, at the first skill's first section
        await registry.close()
    finally:
        released.set()
        await asyncio.to_thread(writer.shutdown)  # the hop ends
    sections = []  # each skill's, as the extractor sees them

    def counting(title: str, text: str, default: Any) -> Any:
        sections[-1] += 1
        return default

    for skill in skills:
        sections.append(0)
        build_graph(load_package(skill.files, skill.folder), counting)
    assert 0 < len(texts) <= sections[0] < sum(sections)  # the first skill's at most, of the hop's eight


async def test_a_registry_started_again_after_close_serves_what_the_store_holds_then() -> None:
    """(Given its own writer, a registry can be started again; the server makes a new one each start.)"""
    from skillstate.server.skills.package import load_package
    from skillstate.server.storage.records import SkillVersion

    skills = generate_library(8, seed=6)
    store, writer = MemorySkillStore(), concurrent.futures.ThreadPoolExecutor(1)
    registry = SkillRegistry(store, writer=writer)
    await registry.start()
    for skill in skills[:4]:
        await registry.register(skill.files, skill.folder)
    await registry.close()
    for skill in skills[4:]:  # as another server would, meanwhile
        package = load_package(skill.files, skill.folder)
        await store.add(SkillVersion(package.name, 1, package.digest, package.folder, 1000.0, package.files))
    await registry.start()
    fresh = SkillRegistry(store)
    await fresh.start()
    try:
        await registry.ready()
        await fresh.ready()
        assert sorted(registry.snapshot.views) == sorted(fresh.snapshot.views) and len(fresh.snapshot.views) == 8
        assert registry.macros.compression() == fresh.macros.compression() and len(fresh.macros) > 0
    finally:
        await registry.close()
        await fresh.close()
        writer.shutdown()
