"""The executions a server holds: in memory once used, recovered from the revision log on first use, so
that startup does not wait for all of them."""

from __future__ import annotations

import asyncio
from typing import NoReturn

import orjson

from ..errors import AlreadyExistsError, NotFoundError, OutOfRangeError
from ..storage.records import ExecutionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .execution import Execution


class Executions:
    """Finds an execution by id, loading it from the log at most once however many callers ask together."""

    def __init__(self, log: RevisionLog, window: int) -> None:
        self._log, self._window = log, window
        self.loaded: dict[str, Execution] = {}
        """Executions in memory."""
        self._stored: dict[str, ExecutionRecord] = {}
        """Executions in the log that are not loaded yet."""
        self._loading: dict[str, asyncio.Task[Execution]] = {}
        self._creating: set[str] = set()

    async def start(self) -> None:
        """List the log's executions (the log is open); each is recovered on first use."""
        self._stored = {record.execution_id: record for record in await self._log.list_executions()}

    async def create(self, execution: Execution, genesis: SnapshotRecord) -> None:
        """Store a new execution with its initial state; AlreadyExistsError if the id is taken."""
        execution_id = execution.id
        if execution_id in self.loaded or execution_id in self._stored or execution_id in self._creating:
            raise AlreadyExistsError(f"execution {execution_id!r} already exists")
        self._creating.add(execution_id)
        try:
            record = ExecutionRecord(execution_id, canonical.dumps_str(execution.schema), execution.created_at)
            await self._log.create_execution(record, genesis)
        finally:
            self._creating.discard(execution_id)
        self.loaded[execution_id] = execution

    def holds(self, execution_id: str) -> bool:
        """Whether the execution is in memory or being loaded."""
        return execution_id in self.loaded or execution_id in self._loading

    def forget(self, execution_id: str) -> None:
        """Drop an execution the log no longer holds (deleted here or by another server); its id may be
        created again."""
        self.loaded.pop(execution_id, None)
        self._stored.pop(execution_id, None)

    async def get(self, execution_id: str) -> Execution:
        """The execution, recovered from the log on first use; concurrent first uses share one recovery."""
        execution = self.loaded.get(execution_id)
        if execution is not None:
            return execution
        if execution_id not in self._loading and execution_id not in self._stored and self._log.shared:
            record = await self._log.find_execution(execution_id)  # created by another server since this one started
            if record is None:
                _raise_not_found(execution_id)
            if execution_id not in self.loaded and execution_id not in self._loading:
                self._stored[execution_id] = record
            return await self.get(execution_id)
        loading = self._loading.get(execution_id)
        if loading is None:
            record = self._stored.get(execution_id)
            if record is None:
                _raise_not_found(execution_id)
            loading = self._loading[execution_id] = asyncio.create_task(self._load(record))
            loading.add_done_callback(_retrieve_exception)
        return await asyncio.shield(loading)

    async def _load(self, record: ExecutionRecord) -> Execution:
        try:
            execution = await self._recover(record)
        except NotFoundError:  # deleted by another server since this one listed it
            self._stored.pop(record.execution_id, None)
            raise
        finally:
            del self._loading[record.execution_id]
        del self._stored[record.execution_id]
        self.loaded[record.execution_id] = execution
        return execution

    async def _recover(self, record: ExecutionRecord) -> Execution:
        execution = Execution(record.execution_id, orjson.loads(record.schema_json), record.created_at, self._window)
        snapshot = await self._log.latest_snapshot(record.execution_id)
        if snapshot is None:
            raise OutOfRangeError(f"execution {record.execution_id!r} has no snapshot to recover from")
        records = await self._log.read_revisions(record.execution_id, after=snapshot.revision)
        execution.recover(snapshot, records)
        execution.compacted = await self._log.compact_revision(record.execution_id)
        older = await self._log.patch_ids(execution.id, snapshot.revision, execution.patch_id_room + 1)
        execution.remember_older_patch_ids(older)
        execution.observation_sequence = execution.observation_committed = await self._log.last_observation_sequence(
            record.execution_id
        )
        return execution


def _raise_not_found(execution_id: str) -> NoReturn:
    raise NotFoundError(f"execution {execution_id!r} not found")


def _retrieve_exception(task: asyncio.Task[Execution]) -> None:
    """Mark a failed recovery's error retrieved: its callers got it, and the next use tries again."""
    if not task.cancelled():
        task.exception()
