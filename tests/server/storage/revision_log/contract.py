"""The behaviour every RevisionLog must have; each backend's test module subclasses RevisionLogContract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from skillstate.server.errors import AlreadyExistsError, DuplicateRowError, NotFoundError, OutOfRangeError
from skillstate.server.storage.records import (
    MAX_LISTED_AGENTS,
    Batch,
    ExecutionRecord,
    ExecutionSummary,
    ObservationRecord,
    RevisionRecord,
    SnapshotRecord,
)
from skillstate.server.storage.revision_log.base import RevisionLog


def execution(execution_id: str = "e1") -> tuple[ExecutionRecord, SnapshotRecord]:
    return ExecutionRecord(execution_id, "{}", 1.5), SnapshotRecord(execution_id, 0, "{}", "h0")


def revision(n: int, execution_id: str = "e1", *, agent: str = "a", key: str = "", at: float = 2.5) -> RevisionRecord:
    return RevisionRecord(execution_id, n, agent, n - 1, f'{{"k":{n}}}', f'{{"k":{n}}}', "null", key, "[]", f"h{n}", at)


def observation(n: int, execution_id: str = "e1", to: str = "*") -> ObservationRecord:
    return ObservationRecord(execution_id, n, to, "env", "alert", f'{{"n":{n}}}', 3.5)


class RevisionLogContract:
    """Subclass and provide a `log` fixture that yields an opened, empty backend."""

    @pytest.fixture
    async def log(self) -> AsyncIterator[RevisionLog]:
        raise NotImplementedError
        yield

    async def test_create_and_find(self, log: RevisionLog) -> None:
        await log.create_execution(*execution("b"))
        await log.create_execution(*execution("a"))
        assert await log.find_execution("a") == execution("a")[0] and await log.find_execution("c") is None
        assert await log.head_revision("a") == 0
        snapshot = await log.latest_snapshot("a")
        assert snapshot == SnapshotRecord("a", 0, "{}", "h0")

    async def test_create_twice_is_already_exists(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        with pytest.raises(AlreadyExistsError):
            await log.create_execution(*execution())

    async def test_unknown_execution_is_not_found(self, log: RevisionLog) -> None:
        with pytest.raises(NotFoundError):
            await log.read_revisions("nope", 0)
        with pytest.raises(NotFoundError):
            await log.commit(Batch(revisions=[revision(1, "nope")]))

    async def test_commit_and_read_ranges(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(Batch(revisions=[revision(n) for n in range(1, 6)]))
        assert await log.head_revision("e1") == 5
        assert [r.revision for r in await log.read_revisions("e1", 0)] == [1, 2, 3, 4, 5]
        assert [r.revision for r in await log.read_revisions("e1", 1, up_to=3)] == [2, 3]
        assert [r.revision for r in await log.read_revisions("e1", 0, limit=2)] == [1, 2]
        assert (await log.read_revisions("e1", 0))[2] == revision(3)

    async def test_duplicate_revision_commits_nothing_of_its_batch(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(Batch(revisions=[revision(1)]))
        with pytest.raises(DuplicateRowError):
            await log.commit(Batch(revisions=[revision(2), revision(1)], observations=[observation(1)]))
        assert [r.revision for r in await log.read_revisions("e1", 0)] == [1]
        assert await log.last_observation_sequence("e1") == 0

    async def test_duplicate_within_one_batch_is_refused(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        with pytest.raises(DuplicateRowError):
            await log.commit(Batch(revisions=[revision(1), revision(1)]))
        assert await log.head_revision("e1") == 0

    async def test_snapshots(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(Batch(snapshots=[SnapshotRecord("e1", 10, '{"a":1}', "h10")]))
        assert (await log.latest_snapshot("e1")).revision == 10  # type: ignore[union-attr]
        assert (await log.latest_snapshot("e1", at_most=9)).revision == 0  # type: ignore[union-attr]

    async def test_find_patch_by_idempotency_key(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(Batch(revisions=[revision(1, key="k1"), revision(2, agent="b", key="k1")]))
        found = await log.find_patch("e1", "b", "k1")
        assert found is not None and found.revision == 2
        assert await log.find_patch("e1", "c", "k1") is None

    async def test_patch_ids_newest_first_up_to_a_revision(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        keyed = [revision(1, key="k1"), revision(2), revision(3, agent="b", key="k1"), revision(4, key="k4")]
        await log.commit(Batch(revisions=[*keyed, revision(5, key="k5")]))
        assert await log.patch_ids("e1", up_to=4, limit=10) == [("a", "k4", 4), ("b", "k1", 3), ("a", "k1", 1)]
        assert await log.patch_ids("e1", up_to=4, limit=2) == [("a", "k4", 4), ("b", "k1", 3)]
        assert await log.patch_ids("e1", up_to=0, limit=10) == []
        with pytest.raises(NotFoundError):
            await log.patch_ids("nope", up_to=4, limit=10)

    async def test_observations(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(Batch(observations=[observation(n) for n in range(1, 4)]))
        assert await log.last_observation_sequence("e1") == 3
        assert [o.sequence for o in await log.read_observations("e1", 1)] == [2, 3]
        assert [o.sequence for o in await log.read_observations("e1", 0, limit=1)] == [1]
        assert (await log.read_observations("e1", 0))[0] == observation(1)

    async def test_executions_are_isolated(self, log: RevisionLog) -> None:
        await log.create_execution(*execution("a"))
        await log.create_execution(*execution("b"))
        await log.commit(Batch(revisions=[revision(1, "a"), revision(1, "b"), revision(2, "b")]))
        assert await log.head_revision("a") == 1
        assert await log.head_revision("b") == 2

    async def test_overlapping_commits_and_compaction(self, log: RevisionLog) -> None:
        """Regression: a compaction started while a group commit was in flight failed both on SQLite."""
        await log.create_execution(*execution())
        await log.commit(Batch(revisions=[revision(1), revision(2)], snapshots=[SnapshotRecord("e1", 2, "{}", "h2")]))
        await asyncio.gather(
            *(log.commit(Batch(revisions=[revision(n)])) for n in range(3, 23)),
            log.compact("e1", 2),
        )
        assert [r.revision for r in await log.read_revisions("e1", 0)] == list(range(3, 23))

    @pytest.mark.parametrize("compact", [False, True])
    async def test_load_reads_what_recovery_asks_for_one_call_at_a_time(self, log: RevisionLog, compact: bool) -> None:
        """load_execution against its definition: the calls it stands for, each made alone."""
        assert await log.load_execution("e1", 10) is None
        await log.create_execution(*execution())
        keyed = [revision(n, key=f"k{n}" if n % 3 else "") for n in range(1, 13)]
        snapshots = [SnapshotRecord("e1", 4, "{}", "h4"), SnapshotRecord("e1", 9, '{"k":9}', "h9")]
        await log.commit(Batch(revisions=keyed, snapshots=snapshots, observations=[observation(1), observation(2)]))
        if compact:
            await log.compact("e1", 4)
        for limit in (0, 2, 100):
            loaded = await log.load_execution("e1", limit)
            assert loaded is not None
            assert loaded.record == await log.find_execution("e1")
            assert loaded.compacted == await log.compact_revision("e1") == (4 if compact else 0)
            assert loaded.snapshot == await log.latest_snapshot("e1") == snapshots[1]
            assert loaded.revisions == await log.read_revisions("e1", after=9) == keyed[9:]
            assert loaded.patch_ids == await log.patch_ids("e1", 9, limit)
            assert loaded.last_observation == await log.last_observation_sequence("e1") == 2
        assert [key for _, key, _ in loaded.patch_ids] == ["k8", "k7", "k5"] + ([] if compact else ["k4", "k2", "k1"])

    async def test_compact(self, log: RevisionLog) -> None:
        await log.create_execution(*execution())
        await log.commit(
            Batch(revisions=[revision(n) for n in range(1, 5)], snapshots=[SnapshotRecord("e1", 2, "{}", "h2")])
        )
        with pytest.raises(OutOfRangeError):
            await log.compact("e1", 3)
        await log.compact("e1", 2)
        assert await log.compact_revision("e1") == 2
        assert [r.revision for r in await log.read_revisions("e1", 0)] == [3, 4]
        assert (await log.latest_snapshot("e1", at_most=1)) is None
        assert await log.head_revision("e1") == 4

    async def test_summaries_page_by_id_and_prefix_in_code_point_order(self, log: RevisionLog) -> None:
        ids = ["order-2", "Order-1", "order-10", "order-1", "other", "ord", "order.x", "order-1:a"]
        for execution_id in ids:
            await log.create_execution(*execution(execution_id))
        listed = [s.execution_id for s in await log.list_summaries("", "", 100)]
        assert listed == sorted(ids)  # by code point: "O" before "o", "-" before "." before ":"
        prefixed = [s.execution_id for s in await log.list_summaries("order-1", "", 100)]
        assert prefixed == ["order-1", "order-10", "order-1:a"]
        pages, after = [], ""
        while page := await log.list_summaries("order", after, 2):
            pages.append([s.execution_id for s in page])
            after = page[-1].execution_id
        assert pages == [["order-1", "order-10"], ["order-1:a", "order-2"], ["order.x"]]
        assert await log.list_summaries("none", "", 10) == []

    async def test_a_summary_says_head_update_time_agents_and_compaction(self, log: RevisionLog) -> None:
        await log.create_execution(*execution("fresh"))
        await log.create_execution(*execution())
        agents = [f"agent-{n:03d}" for n in range(MAX_LISTED_AGENTS + 5)]
        await log.commit(Batch(revisions=[revision(n + 1, agent=a, at=10.0 + n) for n, a in enumerate(agents)]))
        await log.commit(Batch(revisions=[revision(len(agents) + 1, agent="agent-000", at=99.0)]))
        head = len(agents) + 1
        written, fresh = await log.list_summaries("", "", 10)
        assert fresh == ExecutionSummary("fresh", 1.5, 0, 1.5, (), 0, 0)  # created, never written
        assert written == ExecutionSummary("e1", 1.5, head, 99.0, tuple(agents[:MAX_LISTED_AGENTS]), len(agents), 0)
        await log.commit(Batch(snapshots=[SnapshotRecord("e1", head, "{}", f"h{head}")]))
        await log.compact("e1", head)  # the whole history: the head's commit time is gone with it
        (compacted,) = await log.list_summaries("e1", "", 10)
        assert compacted == ExecutionSummary("e1", 1.5, head, None, written.agents, len(agents), head)

    async def test_a_deleted_execution_is_gone_whole_and_its_id_starts_fresh(self, log: RevisionLog) -> None:
        for execution_id in ("e1", "e2"):
            await log.create_execution(*execution(execution_id))
            await log.commit(
                Batch(
                    revisions=[revision(1, execution_id, key="k"), revision(2, execution_id, agent="b")],
                    snapshots=[SnapshotRecord(execution_id, 2, "{}", "h2")],
                    observations=[observation(1, execution_id)],
                )
            )
        await log.delete_execution("e1")
        assert await log.find_execution("e1") is None
        assert [s.execution_id for s in await log.list_summaries("", "", 10)] == ["e2"]
        with pytest.raises(NotFoundError):
            await log.read_revisions("e1", 0)
        with pytest.raises(NotFoundError):
            await log.delete_execution("e1")
        await log.create_execution(*execution("e1"))  # again: nothing of the old one is left
        assert await log.read_revisions("e1", 0) == [] and await log.read_observations("e1", 0) == []
        assert await log.find_patch("e1", "a", "k") is None and await log.head_revision("e1") == 0
        assert (await log.latest_snapshot("e1")) == SnapshotRecord("e1", 0, "{}", "h0")
        assert (await log.list_summaries("e1", "", 10))[0].agents == ()
        await log.commit(Batch(revisions=[revision(1, "e1")]))  # revision 1 again, for the new one
        assert [r.revision for r in await log.read_revisions("e2", 0)] == [1, 2]  # the other one untouched
