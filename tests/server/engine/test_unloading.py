"""Executions unloaded from memory and loaded again from the log (server/engine/executions.py): the same
state, hashes, merges and idempotency answers as an engine that never unloads, under every merge policy;
nothing in use is ever unloaded; concurrent first uses share one load."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.observations import GroupOptions
from skillstate.server.engine.policy import MergePolicy
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import NotFoundError, OutOfRangeError, StateError
from skillstate.server.storage.records import ExecutionRecord, SnapshotRecord, StoredExecution
from skillstate.server.storage.revision_log.base import RevisionLog
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from ...waiting import eventually

SCHEMA = {
    "type": "object",
    "properties": {
        "slots": {"type": "object"},  # reject: no x-merge
        "owner": {"x-merge": "lww"},
        "count": {"type": "integer", "x-merge": "counter"},
        "high": {"type": "integer", "x-merge": "max"},
        "low": {"type": "integer", "x-merge": "min"},
        "tags": {"type": "array", "x-merge": "set"},
        "log": {"type": "array", "x-merge": "append"},
        "notes": {"type": "string", "x-merge": "text"},
    },
}
INITIAL = {"slots": {}, "count": 0, "high": 0, "low": 0, "tags": [], "log": [], "notes": "plan the route"}
assert {node.get("x-merge", "reject") for node in SCHEMA["properties"].values()} == {p.value for p in MergePolicy}

VALUES = {
    "slots": st.dictionaries(st.sampled_from("abc"), st.integers(0, 3) | st.none(), max_size=2),
    "owner": st.sampled_from(["ada", "bob", None]),
    "count": st.integers(-3, 3),
    "high": st.integers(-5, 5),
    "low": st.integers(-5, 5),
    "tags": st.lists(st.sampled_from("xyz"), max_size=2),
    "log": st.lists(st.integers(0, 9), max_size=2),
    "notes": st.sampled_from(["plan the route", "plan the fast route", "plan a route", "route"]),
}
Step = tuple[str, int, dict[str, Any], str] | int
"""(agent, revisions behind the head its base is, patch, idempotency key or ""), or the number of an earlier
step to send again exactly as it was sent (a client's retry)."""


@st.composite
def histories(draw: st.DrawFn) -> list[Step]:
    steps: list[Step] = []
    for n in range(draw(st.integers(1, 18))):
        if steps and draw(st.integers(0, 5)) == 0:
            steps.append(draw(st.integers(0, len(steps) - 1)))
            continue
        paths = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3, unique=True))
        patch = {path: draw(VALUES[path]) for path in paths}
        key = f"k{n}" if draw(st.booleans()) else ""
        steps.append((draw(st.sampled_from(["ada", "bob", "cy"])), draw(st.integers(0, 4)), patch, key))
    return steps


async def replay(engine: StateEngine, steps: list[Step], other: str | None = None) -> list[Any]:
    """Everything the engine answers to the steps on execution "x": each result or refusal, the states and
    hashes at every revision, and the history. With `other`, an execution of that id is used between any
    two calls (under a cap of 0, "x" is unloaded each time it goes idle)."""
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    answers: list[Any] = []
    sent: list[tuple[str, int, dict[str, Any], str]] = []
    for step in steps:
        if isinstance(step, int):
            agent, base, patch, key = sent[step]
        else:
            agent, behind, patch, key = step
            base = max((await engine.get_state("x")).revision - behind, 0)
        sent.append((agent, base, patch, key))
        if other is not None:
            await engine.get_state(other)
        try:
            result = await engine.submit_patch("x", agent, base, json.dumps(patch), client_patch_id=key)
            answers.append(("ok", result.revision, result.state_hash, result.applied_patch_json, result.resolutions,
                            result.duplicate))  # fmt: skip
        except StateError as error:
            answers.append((type(error).__name__, str(error)))
    head = (await engine.get_state("x")).revision
    history = await engine.history("x", 1, 0, 1000)
    retained = range(history.compact_revision, head + 1)
    answers += [history.compact_revision, *[await engine.get_state("x", revision) for revision in retained]]
    answers += [dataclasses.replace(r, committed_at=0.0) for r in history.revisions]  # times differ between runs
    return answers


SMALL = {"window": 3, "snapshot_every": 4}
"""A window and snapshots so small that a reload starts from a later snapshot, with idempotency keys before it
(compaction, which runs in the background as commits go, is compared apart: its timing would differ)."""


def counting_loads(log: RevisionLog) -> Counter[str]:
    """The log's loads, counted by execution id as it makes them."""
    loads: Counter[str] = Counter()
    load = log.load_execution

    async def counted(execution_id: str, patch_ids: int) -> StoredExecution | None:
        loads[execution_id] += 1
        return await load(execution_id, patch_ids)

    log.load_execution = counted  # type: ignore[method-assign]
    return loads


def answers_of(log: RevisionLog, max_loaded: int | None, steps: list[Step], **config: Any) -> tuple[list[Any], int]:
    """The engine's answers to the steps, and how many times it loaded "x" from the log."""
    loads = counting_loads(log)

    async def main() -> list[Any]:
        engine = StateEngine(log, EngineConfig(max_loaded_executions=max_loaded, **config))
        await engine.start()
        try:
            if max_loaded is not None:
                await engine.create_execution("other", "", "")
            return await replay(engine, steps, "other" if max_loaded is not None else None)
        finally:
            await engine.close()

    return asyncio.run(main()), loads["x"]


@settings(max_examples=60, deadline=None)
@given(histories())
def test_unloaded_between_calls_an_execution_answers_as_one_that_stays_loaded(steps: list[Step]) -> None:
    expected, _ = answers_of(MemoryRevisionLog(), None, steps)
    answers, loads = answers_of(MemoryRevisionLog(), 0, steps)
    assert answers == expected
    assert loads >= len(steps)  # "x" went out of memory between every two of its calls


@settings(max_examples=40, deadline=None)
@given(histories())
def test_with_small_windows_and_frequent_snapshots_too(steps: list[Step]) -> None:
    expected, never = answers_of(MemoryRevisionLog(), None, steps, **SMALL)
    answers, loads = answers_of(MemoryRevisionLog(), 0, steps, **SMALL)
    assert answers == expected and never == 0 and loads >= len(steps)


@pytest.mark.parametrize("max_loaded", [None, 0])
async def test_a_base_compacted_away_is_refused_whether_memory_still_holds_it_or_not(max_loaded: int | None) -> None:
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(max_loaded_executions=max_loaded, snapshot_every=5))
    await engine.start()
    try:
        await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
        for n in range(12):
            await engine.submit_patch("x", "ada", n, json.dumps({"count": n}))
        assert await engine.compact("x", 10) == 10
        with pytest.raises(OutOfRangeError, match="base_revision: 2 was compacted away"):
            await engine.submit_patch("x", "bob", 2, '{"owner": "bob"}')  # the window still holds 2 when loaded
        assert (await engine.submit_patch("x", "bob", 10, '{"owner": "bob"}')).revision == 13
    finally:
        await engine.close()


def test_on_sqlite_an_execution_loaded_again_answers_as_one_that_stays_loaded() -> None:
    steps: list[Step] = [
        ("ada", 0, {"count": 2, "notes": "plan the fast route", "owner": "ada"}, "a1"),
        ("bob", 1, {"count": 1, "notes": "plan a route", "tags": ["x"], "owner": "bob"}, "b1"),
        ("ada", 0, {"slots": {"a": 1}, "high": 4, "low": -2, "log": [1]}, ""),
        ("cy", 2, {"slots": {"a": 2}, "high": 2, "low": -4, "log": [2]}, "c1"),  # reject conflicts on slots
        1,  # bob's retry
        ("cy", 3, {"tags": ["y"], "log": [3], "count": -1}, "c2"),
    ]
    with tempfile.TemporaryDirectory() as folder:
        expected, _ = answers_of(SqliteRevisionLog(Path(folder, "kept.db")), None, steps)
        answers, loads = answers_of(SqliteRevisionLog(Path(folder, "unloaded.db")), 0, steps)
    assert answers == expected and loads >= len(steps)
    assert sum(answer[0] == "ConflictError" for answer in answers[: len(steps)]) >= 1  # a merge was refused
    assert answers[4][-1] is True  # the retry, after "x" was unloaded, was recognized as one


class CountingLog(MemoryRevisionLog):
    """The in-memory log, counting loads and holding each until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.loading = asyncio.Event()

    async def load_execution(self, execution_id: str, patch_ids: int) -> StoredExecution | None:
        self.loads += 1
        self.loading.set()
        await self.gate.wait()
        return await super().load_execution(execution_id, patch_ids)


class SlowChanges(CountingLog):
    """The counting log, whose creates and deletes are durable at once but answered when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.changed = asyncio.Event()

    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        await super().create_execution(execution, genesis)
        self.changed.set()
        await self.answer.wait()

    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        head = await super().delete_execution(execution_id)
        self.changed.set()
        await self.answer.wait()
        return head


@pytest.mark.parametrize("max_loaded", [None, 0])
async def test_a_call_made_while_its_execution_is_created_waits_for_the_creation(max_loaded: int | None) -> None:
    """The row is in the log before the creator resumes: a call must not load a second copy meanwhile."""
    log = SlowChanges()
    engine = StateEngine(log, EngineConfig(max_loaded_executions=max_loaded))
    await engine.start()
    try:
        creating = asyncio.create_task(engine.create_execution("x", "", '{"n": 0}'))
        await log.changed.wait()
        writing = asyncio.create_task(engine.submit_patch("x", "ada", 0, '{"n": 1}'))
        log.answer.set()
        await creating
        assert (await writing).revision == 1
        assert (await engine.get_state("x")).state_json == '{"n":1}'
        assert log.loads == (0 if max_loaded is None else 2)  # after the creation: each call loads it (cap 0)
    finally:
        await engine.close()


async def test_a_create_waits_for_a_load_of_its_id_to_find_nothing() -> None:
    log = CountingLog()
    engine = StateEngine(log, EngineConfig(max_loaded_executions=0))
    await engine.start()
    try:
        log.gate.clear()
        reading = asyncio.create_task(engine.get_state("x"))
        await log.loading.wait()
        creating = asyncio.create_task(engine.create_execution("x", "", ""))
        log.gate.set()
        await creating  # not ALREADY_EXISTS: the load found no such execution
        with pytest.raises(NotFoundError):
            await reading
    finally:
        await engine.close()


async def test_a_call_made_while_an_unloaded_execution_is_deleted_finds_it_gone() -> None:
    log = SlowChanges()
    log.answer.set()
    engine = StateEngine(log, EngineConfig(max_loaded_executions=0))
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        assert "x" not in engine._executions.loaded
        log.answer.clear()
        log.changed.clear()
        deleting = asyncio.create_task(engine.delete_execution("x"))
        await log.changed.wait()
        reading = asyncio.create_task(engine.get_state("x"))
        log.answer.set()
        assert await deleting == 0
        with pytest.raises(NotFoundError):
            await reading
        assert "x" not in engine._executions.loaded
        await engine.create_execution("x", "", '{"again": true}')  # its id starts fresh
    finally:
        await engine.close()


@pytest.fixture
async def capped() -> Any:
    log = CountingLog()
    engine = StateEngine(log, EngineConfig(max_loaded_executions=0))
    await engine.start()
    try:
        yield engine, log
    finally:
        log.gate.set()
        await engine.close()


async def test_concurrent_first_reads_share_one_load(capped: tuple[StateEngine, CountingLog]) -> None:
    engine, log = capped
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    assert "x" not in engine._executions.loaded  # idle at once, under a cap of 0
    log.gate.clear()
    reads = [asyncio.create_task(engine.get_state("x")) for _ in range(64)]
    await log.loading.wait()
    log.gate.set()
    views = await asyncio.gather(*reads)
    assert log.loads == 1 and len(set(views)) == 1 and views[0].revision == 0
    assert "x" not in engine._executions.loaded  # every reader let go of it: unloaded again


async def test_callers_cancelled_while_it_loads_or_after_leave_it_unpinned(
    capped: tuple[StateEngine, CountingLog],
) -> None:
    engine, log = capped
    await engine.create_execution("x", "", "")
    log.gate.clear()
    early, late, kept = (asyncio.create_task(engine.get_state("x")) for _ in range(3))
    await log.loading.wait()
    early.cancel()  # while the load is under way
    with pytest.raises(asyncio.CancelledError):
        await early
    # once loaded, "x" is pinned for each caller still waiting; `late` is cancelled before it resumes
    engine._executions._loading["x"].task.add_done_callback(lambda _: late.cancel())
    log.gate.set()
    assert (await kept).revision == 0
    with pytest.raises(asyncio.CancelledError):
        await late
    assert "x" not in engine._executions.loaded and log.loads == 1  # no pin left behind


async def test_a_watch_keeps_its_execution_in_memory_and_hears_every_commit(
    capped: tuple[StateEngine, CountingLog],
) -> None:
    engine, log = capped
    await engine.create_execution("x", "", "")
    watch = engine.watch("x", 0)
    await engine.submit_patch("x", "ada", 0, '{"n": 1}')
    assert (await anext(watch)).revision == 1
    watched = log.loads
    for n in range(2, 6):
        await engine.create_execution(f"other-{n}", "", "")  # each unloaded as it goes idle
        await engine.submit_patch("x", "ada", n - 1, json.dumps({"n": n}))
        assert (await anext(watch)).revision == n
    assert "x" in engine._executions.loaded and log.loads == watched  # never unloaded while watched
    await watch.aclose()
    assert "x" not in engine._executions.loaded  # idle once the watch ended
    assert (await engine.get_state("x")).state_json == '{"n":5}' and log.loads == watched + 1


async def test_a_consumer_group_keeps_its_execution_in_memory_until_it_is_dropped() -> None:
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(max_loaded_executions=0, group_idle=0.01))
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        stream = engine.group_observations("x", "ada", ["pick"], 0, GroupOptions("pickers"))
        await engine.publish_observation("x", "skill:pick", "env", "order", '{"id": 1}')
        observation, deliveries = await anext(stream)
        assert observation.sequence == 1 and deliveries == 1
        await stream.aclose()  # the group has no member now, and is dropped after group_idle
        assert "x" in engine._executions.loaded
        await eventually(lambda: not engine._observations._groups)  # dropped by its idle timer
        assert "x" not in engine._executions.loaded
    finally:
        await engine.close()
