"""The narrow interface every durable backend implements, and the contract the test suite holds it to.

A backend stores executions, revisions, snapshots and observations; it never merges or validates. The
engine keeps hot state in memory and reads the log back only to recover, to serve old history, or to
resolve a patch whose base is older than the in-memory window.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ...errors import CorruptLogError
from ..records import (
    Batch,
    ExecutionRecord,
    ExecutionSummary,
    ObservationRecord,
    RevisionRecord,
    SnapshotRecord,
    StoredExecution,
)
from .leases import LeaseTable

HOLDING_EXECUTIONS = ("revisions", "snapshots", "observations", "execution_agents", "executions")
"""Every table of an SQL backend with an execution's rows, the executions table last (the others refer to it)."""
FILL_AGENTS = "INSERT INTO execution_agents SELECT DISTINCT execution_id, agent_id FROM revisions"
"""Fills execution_agents from the revisions, when a version 1 log is upgraded (with each dialect's
'ignore rows already there')."""
ID_CEILING = "\x7f"
"""Sorts after every character an execution id may hold: ids starting with P are those in [P, P + ID_CEILING)."""


def summary(
    execution_id: str,
    created_at: float,
    compact_revision: int,
    head: int | None,
    committed_at: float | None,
    agents: tuple[str, ...],
    agent_count: int,
) -> ExecutionSummary:
    """An SQL backend's row as an ExecutionSummary: `head` and `committed_at` are those of its newest retained
    revision, None when none is retained (the head is then the compact revision, 0 for a new execution)."""
    if head is None:
        head, committed_at = compact_revision, created_at if compact_revision == 0 else None
    return ExecutionSummary(execution_id, created_at, head, committed_at, agents, agent_count, compact_revision)


def load_head(execution_id: str, row: Sequence[Any]) -> tuple[ExecutionRecord, int, SnapshotRecord, int]:
    """An SQL backend's first row of a load as values: the execution's columns, its compact revision, its newest
    snapshot's revision, state and hash, and its last observation. CorruptLogError when it has no snapshot."""
    *record, compacted, revision, state_json, state_hash, last_observation = row
    if revision is None:
        raise _no_snapshot(execution_id)
    snapshot = SnapshotRecord(execution_id, revision, state_json, state_hash)
    return ExecutionRecord(*record), int(compacted), snapshot, int(last_observation)


def _no_snapshot(execution_id: str) -> CorruptLogError:
    return CorruptLogError(f"execution {execution_id!r} has no snapshot to recover from")


class RevisionLog(abc.ABC):
    """Durable storage of executions and their revision logs.

    Contract (tests/server/storage/revision_log/contract.py): calls may overlap (a compaction during a
    commit); `commit` is atomic; a second row with the same (execution_id, revision), (execution_id,
    snapshot revision) or (execution_id, sequence) raises DuplicateRowError and commits nothing of its
    batch; reads only ever see committed batches.
    """

    shared = False
    """Whether other servers may commit to this log too (replicas on PostgreSQL): the engine then treats
    what it holds in memory as a cache of the log, catching up before it answers a read and after it loses
    a commit to another server."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Prepare the backend (connect, create tables); idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release every resource; the log is unusable afterwards."""

    @abc.abstractmethod
    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        """Store a new execution with its revision-0 snapshot; AlreadyExistsError if the id is taken."""

    @abc.abstractmethod
    async def find_execution(self, execution_id: str) -> ExecutionRecord | None:
        """One execution, or None."""

    async def load_execution(self, execution_id: str, patch_ids: int) -> StoredExecution | None:
        """Everything recovering an execution reads, or None if there is no such execution; `patch_ids`: how
        many idempotency keys from before the newest snapshot to read at most. NotFoundError if it is
        deleted meanwhile. (Here, one call after another: a backend may read it all at once.)"""
        record = await self.find_execution(execution_id)
        if record is None:
            return None
        snapshot = await self.latest_snapshot(execution_id)
        if snapshot is None:
            raise _no_snapshot(execution_id)
        return StoredExecution(
            record,
            await self.compact_revision(execution_id),
            snapshot,
            await self.read_revisions(execution_id, after=snapshot.revision),
            await self.patch_ids(execution_id, snapshot.revision, patch_ids),
            await self.last_observation_sequence(execution_id),
        )

    @abc.abstractmethod
    async def list_summaries(self, prefix: str, after: str, limit: int) -> list[ExecutionSummary]:
        """Executions whose id starts with `prefix` and sorts after `after`, ascending by id, at most `limit`;
        the agents of each are those of its revisions ever committed, compacted ones included."""

    @abc.abstractmethod
    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        """Remove the execution and all it holds (revisions, snapshots, observations) in one transaction, so
        that its id may be created again; returns the head revision it removed. NotFoundError if there is
        none. On a shared log, a commit to it in flight on another server is either before the delete (and
        removed with it) or fails NotFoundError; with `lease_epoch`, the delete is refused (FencedError)
        unless this replica still holds the execution's lease at that epoch."""

    async def changes(self) -> AsyncIterator[str]:
        """Ids of executions that other servers committed to, as they commit (a shared log only); may
        repeat an id and may miss one when the connection drops, so a reader also polls."""
        return
        yield

    def leases(self) -> LeaseTable | None:
        """This server's hold on the leases of a shared log's executions (leases.py); None on a log of one
        server's own, whose executions are all its own."""
        return None

    @abc.abstractmethod
    async def commit(self, batch: Batch) -> None:
        """Make the whole batch durable in one transaction, or none of it."""

    @abc.abstractmethod
    async def head_revision(self, execution_id: str) -> int:
        """The newest committed revision (0 when only the initial state exists)."""

    @abc.abstractmethod
    async def read_revisions(
        self, execution_id: str, after: int, up_to: int | None = None, limit: int | None = None
    ) -> list[RevisionRecord]:
        """Revisions r with after < r <= up_to (no upper bound when None), ascending, at most `limit`."""

    @abc.abstractmethod
    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        """The newest snapshot whose revision is <= at_most (any when None)."""

    @abc.abstractmethod
    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str) -> RevisionRecord | None:
        """The revision an agent committed under an idempotency key, if any."""

    @abc.abstractmethod
    async def patch_ids(self, execution_id: str, up_to: int, limit: int) -> list[tuple[str, str, int]]:
        """(agent_id, client_patch_id, revision) of the newest `limit` revisions r <= up_to committed under
        an idempotency key, newest first."""

    @abc.abstractmethod
    async def read_observations(
        self, execution_id: str, after: int, limit: int | None = None
    ) -> list[ObservationRecord]:
        """Observations with sequence > after, ascending, at most `limit`."""

    @abc.abstractmethod
    async def last_observation_sequence(self, execution_id: str) -> int:
        """The greatest observation sequence stored (0 when none)."""

    @abc.abstractmethod
    async def compact(self, execution_id: str, up_to: int, lease_epoch: int | None = None) -> None:
        """Drop revisions <= up_to and older snapshots; needs a snapshot at up_to (OutOfRangeError if none).
        With `lease_epoch` (a shared log), refused (FencedError) unless this replica still holds that lease."""

    @abc.abstractmethod
    async def compact_revision(self, execution_id: str) -> int:
        """Revisions up to this one were compacted away (0 when the whole log is retained)."""
