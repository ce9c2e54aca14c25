"""The engine without sockets: replay, recovery, idempotency, old bases, compaction, failed commits."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from skillstate.server.engine import patch_keys
from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.merge import Resolution
from skillstate.server.engine.results import WatchSnapshot
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    CorruptLogError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    StorageError,
)
from skillstate.server.limits import Limits
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from ...waiting import eventually

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "x-merge": "counter"},
        "tags": {"type": "array", "x-merge": "set"},
        "notes": {"type": "string", "x-merge": "text"},
        "owner": {"x-merge": "lww"},
        "log": {"type": "array", "x-merge": "append"},
        "slots": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
    },
}
INITIAL = {"count": 0, "tags": [], "notes": "plan", "log": [], "slots": {}}


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int, dict]]:
    """(agent, how many revisions back the base is, patch) for a run of submits.

    Every history ends with three counter writes on head and one from 3-6 revisions back: at least one
    patch is merged with a base outside a window of 2, whatever came before.
    """
    steps = []
    for i in range(draw(st.integers(1, 25))):
        patch: dict = {}
        for field in draw(st.sets(st.sampled_from(["count", "tags", "notes", "owner", "log", "slot"]), min_size=1)):
            if field == "count":
                patch["count"] = draw(st.integers(0, 5))
            elif field == "tags":
                patch["tags"] = draw(st.lists(st.sampled_from("abc"), max_size=3))
            elif field == "notes":
                patch["notes"] = draw(st.sampled_from(["plan", "plan A", "the plan", "plan!"]))
            elif field == "owner":
                patch["owner"] = draw(st.one_of(st.none(), st.sampled_from(["ada", "bob"])))
            elif field == "log":
                patch["log"] = [f"e{i}"]
            else:
                patch["slots"] = {draw(st.sampled_from("xyz")): draw(st.one_of(st.none(), st.integers(0, 3)))}
        steps.append((draw(st.sampled_from(["ada", "bob", "cy"])), draw(st.integers(0, 6)), patch))
    agents = st.sampled_from(["ada", "bob", "cy"])
    steps.extend((draw(agents), 0, {"count": draw(st.integers(0, 5))}) for _ in range(3))
    steps.append((draw(agents), draw(st.integers(3, 6)), {"count": draw(st.integers(0, 5))}))
    return steps


@dataclass(frozen=True)
class Played:
    """One step of a history: the base it was submitted on and what became of it."""

    head: int
    base: int
    outcome: str
    """The error's type name, or "accepted"."""
    revision: int = 0
    state_json: str = ""
    state_hash: str = ""
    resolutions: tuple[Resolution, ...] = ()


async def play(engine: StateEngine, steps: list[tuple[str, int, dict]]) -> list[Played]:
    """Submit every step against an older base."""
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    seen = []
    for agent, back, patch in steps:
        head = await engine.head_revision("x")
        base = max(0, head - back)
        try:
            result = await engine.submit_patch("x", agent, base, json.dumps(patch))
        except (ConflictError, InvalidArgumentError) as e:
            seen.append(Played(head, base, type(e).__name__))
            continue
        view = await engine.get_state("x")
        seen.append(Played(head, base, "accepted", view.revision, view.state_json, view.state_hash, result.resolutions))
    return seen


@settings(max_examples=40)
@given(histories())
def test_replay_and_cold_loads_give_identical_states_and_hashes(steps: list[tuple[str, int, dict]]) -> None:
    """An execution unloaded after every call is loaded from the newest snapshot (every 3 revisions) each
    time, so a base before it is merged after reading the log back to it (Timeline.extend), with a window of
    2: every step must end as with everything in memory, and at least one merge in each history had its base
    outside the window."""

    async def main() -> None:
        log = MemoryRevisionLog()
        roomy = StateEngine(log, EngineConfig(window=256))
        await roomy.start()
        expected = await play(roomy, steps)
        await roomy.close()

        tight = StateEngine(MemoryRevisionLog(), EngineConfig(window=2, snapshot_every=3, max_loaded_executions=0))
        await tight.start()
        assert await play(tight, steps) == expected, "a base outside the window merged differently"
        await tight.close()
        stale = [p for p in expected if p.outcome == "accepted" and p.resolutions]
        outside = [p for p in stale if p.head - p.base > 2]
        assert outside, f"no merge had its base outside the window: {expected}"
        event(f"merges outside the window: {min(len(outside), 5)}{'+' if len(outside) >= 5 else ''}")
        event(f"merges in all: {min(len(stale), 5)}{'+' if len(stale) >= 5 else ''}")

        recovered = StateEngine(log, EngineConfig(window=2))
        await recovered.start()
        for played in expected:
            if played.outcome == "accepted":
                view = await recovered.get_state("x", played.revision)
                assert (view.state_json, view.state_hash) == (played.state_json, played.state_hash)
        await recovered.close()

    asyncio.run(main())


@pytest.fixture
async def engine(tmp_path: Path):
    engine = StateEngine(SqliteRevisionLog(tmp_path / "e.db"), EngineConfig(window=4, snapshot_every=5))
    await engine.start()
    yield engine
    await engine.close()


async def test_retry_with_the_same_key_returns_the_original_result(engine: StateEngine) -> None:
    await engine.create_execution("x", "", "{}")
    first = await engine.submit_patch("x", "ada", 0, '{"a":1}', "k1", '"act"')
    again = await engine.submit_patch("x", "ada", 0, '{"a":1}', "k1", '"act"')
    assert again.duplicate and (again.revision, again.state_hash) == (first.revision, first.state_hash)
    assert await engine.head_revision("x") == 1
    with pytest.raises(AlreadyExistsError, match="client_patch_id"):
        await engine.submit_patch("x", "ada", 0, '{"a":2}', "k1")
    other_agent = await engine.submit_patch("x", "bob", 1, '{"b":1}', "k1")
    assert not other_agent.duplicate and other_agent.revision == 2


async def test_concurrent_duplicates_apply_once(engine: StateEngine) -> None:
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    results = await asyncio.gather(*(engine.submit_patch("x", "ada", 0, '{"count":1}', "same") for _ in range(5)))
    assert {r.revision for r in results} == {1}
    assert json.loads((await engine.get_state("x")).state_json)["count"] == 1


async def test_idempotency_survives_restart_and_a_trimmed_key_memory(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    first = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=3))
    await first.start()
    await first.create_execution("x", "", "{}")
    for i in range(7):
        await first.submit_patch("x", "ada", i, json.dumps({"n": i}), f"k{i}")
    await first.close()
    second = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=3))
    await second.start()  # recovers from the snapshot at 6, and the keys before it from the log
    result = await second.submit_patch("x", "ada", 1, '{"n":1}', "k1")
    assert result.duplicate and result.revision == 2
    assert await second.head_revision("x") == 7
    await second.close()


async def test_after_a_restart_from_a_snapshot_keys_are_known_without_the_log(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    first = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=3))
    await first.start()
    await first.create_execution("x", "", "{}")
    for i in range(7):
        await first.submit_patch("x", "ada", i, json.dumps({"n": i}), f"k{i}")
    await first.close()
    second = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=3))
    await second.start()
    assert await second.head_revision("x") == 7  # recovered from the snapshot at 6
    assert second.submit_patch_now("x", "ada", 7, '{"n":1}', "k1") is None  # used before the snapshot
    committing = second.submit_patch_now("x", "ada", 7, '{"n":7}', "k7")  # new: merged at once, as before
    assert committing is not None
    await committing.durable
    assert committing.result.revision == 8
    again = await second.submit_patch("x", "ada", 7, '{"n":7}', "k7")
    assert again.duplicate and again.revision == 8
    await second.close()


@pytest.mark.parametrize("snapshot_every", [4, 100], ids=["keys before the snapshot", "keys replayed past the cap"])
async def test_keys_beyond_memory_are_looked_up_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot_every: int
) -> None:
    monkeypatch.setattr(patch_keys, "MAX_PATCH_IDS", 3)
    path = tmp_path / "e.db"
    first = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=snapshot_every))
    await first.start()
    await first.create_execution("x", "", "{}")
    for i in range(9):
        await first.submit_patch("x", "ada", i, json.dumps({"n": i}), f"k{i}")
    await first.close()
    second = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=snapshot_every))
    await second.start()
    try:
        assert await second.head_revision("x") == 9
        assert second.submit_patch_now("x", "ada", 9, '{"n":0}', "k0") is None  # maybe used: the log decides
        result = await second.submit_patch("x", "ada", 0, '{"n":0}', "k0")
        assert result.duplicate and result.revision == 1
    finally:
        await second.close()


async def test_a_key_whose_revision_was_compacted_applies_again(tmp_path: Path) -> None:
    engine = StateEngine(SqliteRevisionLog(tmp_path / "r.db"), EngineConfig(window=4, snapshot_every=5))
    await engine.start()
    await engine.create_execution("x", "", "{}")
    await engine.submit_patch("x", "ada", 0, '{"n":0}', "old")
    for i in range(1, 12):
        await engine.submit_patch("x", "ada", i, json.dumps({"n": i}))
    assert await engine.compact("x", 10) == 10
    # regression: memory still held the key, and reading its revision back from the log failed (INTERNAL)
    retried = await engine.submit_patch("x", "ada", 12, '{"n":0}', "old")  # its revision 1 is gone
    assert not retried.duplicate and retried.revision == 13
    await engine.close()


async def test_recovery_restores_head_window_and_sequences(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    first = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=4))
    await first.start()
    await first.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    for i in range(10):
        await first.submit_patch("x", "ada", 0, json.dumps({"count": 1, "log": [i]}))
    await first.publish_observation("x", "*", "env", "tick", "1")
    before = await first.get_state("x")
    await first.close()
    second = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=4))
    await second.start()
    assert await second.get_state("x") == before
    assert json.loads(before.state_json)["count"] == 10
    assert await second.publish_observation("x", "*", "env", "tick", "2") == 2
    await second.close()


async def test_base_ahead_unknown_execution_and_bad_revisions(engine: StateEngine) -> None:
    await engine.create_execution("x", "", "{}")
    with pytest.raises(BaseAheadError):
        await engine.submit_patch("x", "ada", 1, "{}")
    with pytest.raises(InvalidArgumentError, match="base_revision"):
        await engine.submit_patch("x", "ada", -1, "{}")
    with pytest.raises(NotFoundError):
        await engine.submit_patch("y", "ada", 0, "{}")
    with pytest.raises(OutOfRangeError):
        await engine.get_state("x", 5)


async def test_a_base_too_far_behind_is_refused_without_a_merge() -> None:
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(limits=Limits(max_base_lag=3)))
    await engine.start()
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    for i in range(5):
        await engine.submit_patch("x", "ada", i, json.dumps({"count": i + 1}))
    with pytest.raises(
        OutOfRangeError, match="base_revision: 1 is 4 revisions behind the head 5, more than the limit of 3"
    ):
        await engine.submit_patch("x", "bob", 1, '{"count": 9}')
    assert (await engine.submit_patch("x", "bob", 2, '{"count": 4}')).revision == 6  # 3 behind: merged
    await engine.close()


async def test_compacted_history_starts_watch_with_a_snapshot(engine: StateEngine) -> None:
    await engine.create_execution("x", "", "{}")
    for i in range(12):
        await engine.submit_patch("x", "ada", i, json.dumps({"n": i}))
    assert await engine.compact("x", 11) == 10  # the newest snapshot at or before 11
    with pytest.raises(OutOfRangeError, match="compacted"):
        await engine.get_state("x", 3)
    stream = engine.watch("x", 2)
    first = await anext(stream)
    assert isinstance(first, WatchSnapshot) and first.revision == 10 and json.loads(first.state_json) == {"n": 9}
    assert [(await anext(stream)).revision for _ in range(2)] == [11, 12]  # type: ignore[union-attr]
    await stream.aclose()
    page = await engine.history("x", 1, 0, 100)
    assert page.compact_revision == 10 and [r.revision for r in page.revisions] == [11, 12]


async def test_retention_compacts_behind_each_snapshot(tmp_path: Path) -> None:
    engine = StateEngine(SqliteRevisionLog(tmp_path / "r.db"), EngineConfig(snapshot_every=5, retain_revisions=5))
    await engine.start()
    await engine.create_execution("x", "", "{}")
    for i in range(22):
        await engine.submit_patch("x", "ada", i, json.dumps({"n": i}))
    await engine.close()  # waits for the compaction the snapshot at 20 started
    reopened = StateEngine(SqliteRevisionLog(tmp_path / "r.db"))
    await reopened.start()
    page = await reopened.history("x", 1, 0, 100)
    assert page.compact_revision == 15 and [r.revision for r in page.revisions] == list(range(16, 23))
    stream = reopened.watch("x", 0)
    first = await anext(stream)
    assert isinstance(first, WatchSnapshot) and first.revision == 15
    await stream.aclose()
    await reopened.close()


class FlakyLog(MemoryRevisionLog):
    """The in-memory log with a switch that makes commits fail, to inject storage faults."""

    failing = False

    async def commit(self, batch: Batch) -> None:
        if self.failing:
            raise StorageError("disk full (injected)")
        await super().commit(batch)


class GatedLog(MemoryRevisionLog):
    """The in-memory log whose commits wait until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()

    async def commit(self, batch: Batch) -> None:
        await self.gate.wait()
        await super().commit(batch)


async def test_reads_see_only_committed_revisions_while_later_ones_are_pending() -> None:
    log = GatedLog()
    engine = StateEngine(log, EngineConfig(window=4))
    await engine.start()
    try:
        await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
        for i in range(3):
            await engine.submit_patch("x", "ada", i, json.dumps({"count": i + 1, "slots": {f"s{i}": i}}))
        committed = await engine.get_state("x")
        log.gate.clear()
        pending = [
            asyncio.create_task(
                engine.submit_patch("x", f"agent-{i}", 3, json.dumps({"count": 9, "slots": {"s0": None}}))
            )
            for i in range(3)
        ]
        execution = engine._executions.loaded["x"]
        await eventually(lambda: execution.head.revision == 6)  # merged into the head, waiting for their commit
        assert await engine.get_state("x") == committed
        assert (await engine.get_state("x", 2)).state_json == json.dumps(
            {**INITIAL, "count": 2, "slots": {"s0": 0, "s1": 1}}, separators=(",", ":"), sort_keys=True
        )
        log.gate.set()
        assert [r.revision for r in await asyncio.gather(*pending)] == [4, 5, 6]
        state = json.loads((await engine.get_state("x")).state_json)
        assert state["count"] == 3 + 3 * 6 and state["slots"] == {"s1": 1, "s2": 2}
    finally:
        log.gate.set()
        await engine.close()


async def test_a_failed_commit_acknowledges_nothing_and_rolls_back() -> None:
    log = FlakyLog()
    engine = StateEngine(log)
    await engine.start()
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    await engine.submit_patch("x", "ada", 0, '{"count":1}', "k0")
    log.failing = True
    results = await asyncio.gather(
        *(engine.submit_patch("x", "ada", 1, '{"count":2}', f"k{i}") for i in range(1, 4)), return_exceptions=True
    )
    assert all(isinstance(r, StorageError) for r in results)
    assert (await engine.get_state("x")).revision == 1
    log.failing = False
    retried = await engine.submit_patch("x", "ada", 1, '{"count":2}', "k1")
    assert retried.revision == 2 and not retried.duplicate
    assert json.loads((await engine.get_state("x")).state_json)["count"] == 2
    recovered = StateEngine(log)
    await recovered.start()
    assert await recovered.get_state("x") == await engine.get_state("x")
    await engine.close()


class GatedFlakyLog(GatedLog):
    """The gated log whose next commit fails when the test asks."""

    fail_next = False

    async def commit(self, batch: Batch) -> None:
        await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise StorageError("disk full (injected)")
        await super().commit(batch)


async def test_a_patch_is_not_refused_for_a_conflict_with_a_revision_that_failed_to_commit() -> None:
    log = GatedFlakyLog()
    engine = StateEngine(log)
    await engine.start()
    try:
        await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
        log.gate.clear()
        first = asyncio.create_task(engine.submit_patch("x", "ada", 0, '{"slots": {"s0": "ada"}}'))
        execution = engine._executions.loaded["x"]
        await eventually(lambda: execution.head.revision == 1)
        second = asyncio.create_task(engine.submit_patch("x", "bob", 0, '{"slots": {"s0": "bob"}}'))
        await eventually(lambda: bool(execution._settle_waiters))  # lost to ada's pending write: waits for it
        log.fail_next = True
        log.gate.set()
        with pytest.raises(StorageError):
            await first
        assert (await second).revision == 1  # ada's write never landed: nothing to conflict with
        assert json.loads((await engine.get_state("x")).state_json)["slots"] == {"s0": "bob"}
    finally:
        log.gate.set()
        await engine.close()


class CountingLog(SqliteRevisionLog):
    """The SQLite log (whose reads really wait), counting how often the engine reads revisions back."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.revision_reads = 0

    async def read_revisions(self, *args: object, **kwargs: object) -> list:
        self.revision_reads += 1
        return await super().read_revisions(*args, **kwargs)  # type: ignore[arg-type]


async def test_a_stale_base_merges_without_reading_the_log(tmp_path: Path) -> None:
    log = CountingLog(tmp_path / "e.db")
    engine = StateEngine(log, EngineConfig(window=16, snapshot_every=5))
    await engine.start()
    try:
        await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
        for i in range(20):  # base 0 leaves the window
            await engine.submit_patch("x", "writer", i, json.dumps({"count": i + 1, "slots": {f"s{i}": i}}))
        reads = log.revision_reads
        await asyncio.gather(*(engine.submit_patch("x", f"agent-{i}", 0, '{"count": 1}') for i in range(8)))
        assert log.revision_reads == reads, "the path index holds every base since the execution began"
        assert json.loads((await engine.get_state("x")).state_json)["count"] == 20 + 8
    finally:
        await engine.close()


async def test_agents_stale_on_a_base_before_a_load_share_one_reading_of_the_log(tmp_path: Path) -> None:
    """Loaded from the snapshot at 20, the execution's path index starts there: agents on base 0 read the log
    back to it once between them, and merge as if it had never been unloaded."""
    path = tmp_path / "e.db"
    engine = StateEngine(SqliteRevisionLog(path), EngineConfig(snapshot_every=5))
    await engine.start()
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps(INITIAL))
    for i in range(20):
        await engine.submit_patch("x", "writer", i, json.dumps({"count": i + 1, "slots": {f"s{i}": i}}))
    await engine.close()
    log = CountingLog(path)
    restarted = StateEngine(log, EngineConfig(snapshot_every=5))
    await restarted.start()
    try:
        assert (await restarted.get_state("x")).revision == 20 and log.revision_reads == 1  # the load
        await asyncio.gather(*(restarted.submit_patch("x", f"agent-{i}", 0, '{"count": 1}') for i in range(8)))
        assert log.revision_reads == 2
        state = json.loads((await restarted.get_state("x")).state_json)
        assert state["count"] == 20 + 8 and len(state["slots"]) == 20
    finally:
        await restarted.close()


async def write_log(path: Path, names: Sequence[str], patches: int) -> None:
    """A SQLite log holding executions `names`, each with `patches` counter patches."""
    engine = StateEngine(SqliteRevisionLog(path))
    await engine.start()
    for name in names:
        await engine.create_execution(name, json.dumps(SCHEMA), json.dumps(INITIAL))
        for i in range(patches):
            await engine.submit_patch(name, "ada", i, json.dumps({"count": i + 1}))
    await engine.close()


async def test_a_restart_loads_each_execution_on_first_use_once(tmp_path: Path) -> None:
    await write_log(tmp_path / "e.db", ["a", "b"], 3)
    log = CountingLog(tmp_path / "e.db")
    restarted = StateEngine(log)
    await restarted.start()
    try:
        assert log.revision_reads == 0, "start must not replay every execution"
        views = await asyncio.gather(*(restarted.get_state("a") for _ in range(5)))
        assert len(set(views)) == 1 and views[0].revision == 3 and log.revision_reads == 1
        with pytest.raises(AlreadyExistsError):
            await restarted.create_execution("b", "", "{}")  # known although not loaded yet
        assert (await restarted.submit_patch("b", "bob", 3, '{"count": 9}')).revision == 4
    finally:
        await restarted.close()


async def test_a_tampered_log_is_data_loss_for_that_execution_only(tmp_path: Path) -> None:
    await write_log(tmp_path / "e.db", ["a", "b"], 1)
    with sqlite3.connect(tmp_path / "e.db") as db:
        db.execute("UPDATE revisions SET applied_patch_json = '{\"count\":2}' WHERE execution_id = 'a'")
    restarted = StateEngine(SqliteRevisionLog(tmp_path / "e.db"))
    await restarted.start()
    try:
        with pytest.raises(CorruptLogError, match="execution 'a': hash chain broken at revision 1"):
            await restarted.get_state("a")
        with pytest.raises(CorruptLogError):  # still refused: nothing was loaded
            await restarted.submit_patch("a", "ada", 1, '{"count": 3}')
        assert json.loads((await restarted.get_state("b")).state_json)["count"] == 1
    finally:
        await restarted.close()
