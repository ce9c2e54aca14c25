"""An in-memory RevisionLog: the reference behaviour of the contract, for tests and throwaway servers."""

from __future__ import annotations

import bisect
import itertools
from typing import Any

from ...errors import AlreadyExistsError, DuplicateRowError, NotFoundError, OutOfRangeError
from ..records import (
    MAX_LISTED_AGENTS,
    Batch,
    ExecutionRecord,
    ExecutionSummary,
    ObservationRecord,
    RevisionRecord,
    SnapshotRecord,
)
from .base import RevisionLog, summary


class _Execution:
    __slots__ = ("agents", "compacted_to", "observations", "record", "revisions", "snapshots")

    def __init__(self, record: ExecutionRecord) -> None:
        self.record = record
        self.revisions: dict[int, RevisionRecord] = {}
        self.snapshots: dict[int, SnapshotRecord] = {}
        self.observations: dict[int, ObservationRecord] = {}
        self.compacted_to = 0
        self.agents: set[str] = set()
        """Every agent that committed a revision, compacted ones included."""


class MemoryRevisionLog(RevisionLog):
    """Keeps everything in dicts; lost when the process exits."""

    def __init__(self) -> None:
        self._executions: dict[str, _Execution] = {}

    async def open(self) -> None:
        """Nothing to prepare."""

    async def close(self) -> None:
        """Nothing to release: the data stays readable, so a test can recover an engine from it."""

    def _get(self, execution_id: str) -> _Execution:
        try:
            return self._executions[execution_id]
        except KeyError:
            raise NotFoundError(f"execution {execution_id!r} not found") from None

    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        if execution.execution_id in self._executions:
            raise AlreadyExistsError(f"execution {execution.execution_id!r} already exists")
        entry = _Execution(execution)
        entry.snapshots[genesis.revision] = genesis
        self._executions[execution.execution_id] = entry

    async def find_execution(self, execution_id: str) -> ExecutionRecord | None:
        found = self._executions.get(execution_id)
        return found.record if found is not None else None

    async def list_summaries(self, prefix: str, after: str, limit: int) -> list[ExecutionSummary]:
        chosen = sorted(k for k in self._executions if k.startswith(prefix) and k > after)[:limit]
        return [self._summary(self._executions[k]) for k in chosen]

    @staticmethod
    def _summary(entry: _Execution) -> ExecutionSummary:
        newest = entry.revisions[max(entry.revisions)] if entry.revisions else None
        return summary(
            entry.record.execution_id,
            entry.record.created_at,
            entry.compacted_to,
            newest.revision if newest else None,
            newest.committed_at if newest else None,
            tuple(sorted(entry.agents)[:MAX_LISTED_AGENTS]),
            len(entry.agents),
        )

    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        head = await self.head_revision(execution_id)
        del self._executions[execution_id]
        return head

    async def commit(self, batch: Batch) -> None:
        rows: list[tuple[dict[int, Any], int, Any]] = [
            *((self._get(r.execution_id).revisions, r.revision, r) for r in batch.revisions),
            *((self._get(s.execution_id).snapshots, s.revision, s) for s in batch.snapshots),
            *((self._get(o.execution_id).observations, o.sequence, o) for o in batch.observations),
        ]
        keys = [(id(table), key) for table, key, _ in rows]
        if len(set(keys)) != len(keys) or any(key in table for table, key, _ in rows):
            raise DuplicateRowError("a row with the same key is already stored")
        for table, key, row in rows:
            table[key] = row
        for revision in batch.revisions:
            self._executions[revision.execution_id].agents.add(revision.agent_id)

    async def head_revision(self, execution_id: str) -> int:
        entry = self._get(execution_id)
        return max(entry.revisions, default=entry.compacted_to)

    async def read_revisions(
        self, execution_id: str, after: int, up_to: int | None = None, limit: int | None = None
    ) -> list[RevisionRecord]:
        revisions = self._get(execution_id).revisions
        keys = sorted(k for k in revisions if k > after and (up_to is None or k <= up_to))
        return [revisions[k] for k in keys[:limit]]

    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        snapshots = self._get(execution_id).snapshots
        eligible = sorted(k for k in snapshots if at_most is None or k <= at_most)
        return snapshots[eligible[-1]] if eligible else None

    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str) -> RevisionRecord | None:
        for record in self._get(execution_id).revisions.values():
            if record.agent_id == agent_id and record.client_patch_id == client_patch_id:
                return record
        return None

    async def patch_ids(self, execution_id: str, up_to: int, limit: int) -> list[tuple[str, str, int]]:
        revisions = self._get(execution_id).revisions
        keyed = (revisions[r] for r in sorted(revisions, reverse=True) if r <= up_to and revisions[r].client_patch_id)
        return [(record.agent_id, record.client_patch_id, record.revision) for record in itertools.islice(keyed, limit)]

    async def read_observations(
        self, execution_id: str, after: int, limit: int | None = None
    ) -> list[ObservationRecord]:
        observations = self._get(execution_id).observations
        keys = sorted(observations)
        start = bisect.bisect_right(keys, after)
        return [observations[k] for k in keys[start:][:limit]]

    async def last_observation_sequence(self, execution_id: str) -> int:
        return max(self._get(execution_id).observations, default=0)

    async def compact(self, execution_id: str, up_to: int, lease_epoch: int | None = None) -> None:
        entry = self._get(execution_id)
        if up_to not in entry.snapshots:
            raise OutOfRangeError(f"no snapshot at revision {up_to} to compact to")
        entry.revisions = {k: v for k, v in entry.revisions.items() if k > up_to}
        entry.snapshots = {k: v for k, v in entry.snapshots.items() if k >= up_to}
        entry.compacted_to = max(entry.compacted_to, up_to)

    async def compact_revision(self, execution_id: str) -> int:
        return self._get(execution_id).compacted_to
