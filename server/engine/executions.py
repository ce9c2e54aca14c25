"""The executions a server holds in memory: loaded from the revision log on first use, and unloaded again,
least recently used first, once more than `max_loaded` are in memory and nobody uses them.

Everything that works on an execution across an await uses it (`use`, or `pin` and `release`): a call for
its duration, a watch or an observation stream for its life, a consumer group while it exists. An execution
nobody uses and with nothing left to commit is idle, and only an idle one is unloaded: what it held in
memory is in the log (its head, the idempotency keys the log retains, its observation sequence), so loading
it again gives the same state, hash and answers. Concurrent first uses share one load.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import NoReturn

import orjson

from ..errors import AlreadyExistsError, NotFoundError
from ..limits import DEFAULT_LIMITS
from ..storage.records import ExecutionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .execution import Execution
from .leaseholder import Leaseholder
from .patch_keys import MAX_PATCH_IDS


@dataclass
class _Load:
    """A load under way, and how many callers wait for it: each gets the execution pinned for it."""

    task: asyncio.Task[Execution]
    waiting: int = field(default=0)


class Executions:
    """Finds an execution by id, loading it from the log at most once however many callers ask together, and
    keeps at most `max_loaded` in memory beyond those in use (None: no cap)."""

    def __init__(
        self,
        log: RevisionLog,
        window: int,
        max_loaded: int | None = None,
        max_base_lag: int = DEFAULT_LIMITS.max_base_lag,
    ) -> None:
        self._log, self._window, self.max_loaded, self._max_base_lag = log, window, max_loaded, max_base_lag
        self.leaseholder: Leaseholder | None = None
        """On a shared log with leases: an execution is loaded or created only under this replica's lease."""
        self.loaded: dict[str, Execution] = {}
        """Executions in memory."""
        self._idle: collections.OrderedDict[str, Execution] = collections.OrderedDict()
        """The loaded executions nobody uses, least recently used first: the ones that may be unloaded. (A
        dict popped from the front would slow down: its iteration skips the slots left by what it popped.)"""
        self._settling: dict[str, Execution] = {}
        """Idle executions with a commit still pending when their turn to be unloaded came: idle again once it
        is done (`settled`), not rotated through at every unload."""
        self._loading: dict[str, _Load] = {}
        self._changing: dict[str, asyncio.Future[None]] = {}
        """Ids being created, or deleted while not in memory: a use or another change of one waits for it."""
        self.unloads = 0
        """Executions unloaded since the start (a metric)."""

    async def create(self, execution: Execution, genesis: SnapshotRecord) -> None:
        """Store a new execution with its initial state; AlreadyExistsError if the id is taken."""
        execution_id = execution.id
        while (load := self._loading.get(execution_id)) is not None:  # its outcome says whether the id is taken
            with contextlib.suppress(NotFoundError):
                await asyncio.shield(load.task)
        if execution_id in self.loaded or execution_id in self._changing:
            raise AlreadyExistsError(f"execution {execution_id!r} already exists")
        async with self.changing(execution_id):
            lease = self.leaseholder
            if lease is not None:
                expiries = lease.expiries
                execution.lease_epoch = await lease.take(execution_id, new=True)
            record = ExecutionRecord(execution_id, canonical.dumps_str(execution.schema), execution.created_at)
            await self._log.create_execution(record, genesis)
            if lease is not None and not await lease.still_held(execution_id, execution.lease_epoch or 0, expiries):
                return  # created, and already another replica's: it serves the execution from the log
            self.loaded[execution_id] = execution
        self._make_idle(execution)

    @contextlib.asynccontextmanager
    async def changing(self, execution_id: str) -> AsyncIterator[None]:
        """While an execution not in memory is created or deleted: nothing loads it meanwhile (a use waits for
        the change, then finds it created, or not at all), and another change of it waits its turn."""
        while (other := self._changing.get(execution_id)) is not None:
            await asyncio.shield(other)
        done = self._changing[execution_id] = asyncio.get_running_loop().create_future()
        try:
            yield
        finally:
            del self._changing[execution_id]
            done.set_result(None)

    def holds(self, execution_id: str) -> bool:
        """Whether the execution is in memory or being loaded."""
        return execution_id in self.loaded or execution_id in self._loading

    def touch(self, execution: Execution) -> None:
        """A use with no await (a session's submit): the execution is now the most recently used."""
        if execution.id in self._idle:
            self._idle.move_to_end(execution.id)

    def settled(self, execution: Execution) -> None:
        """A commit of the execution ended (durable or rolled back): if it waited for that, it is idle again."""
        if not execution.pending and self._settling.pop(execution.id, None) is execution:
            self._make_idle(execution)

    def forget(self, execution_id: str) -> None:
        """Drop an execution the log no longer holds (deleted here or by another server); its id may be
        created again."""
        self.loaded.pop(execution_id, None)
        self._idle.pop(execution_id, None)
        self._settling.pop(execution_id, None)

    @contextlib.asynccontextmanager
    async def use(self, execution_id: str) -> AsyncIterator[Execution]:
        """The execution, loaded if need be and kept in memory until the block ends."""
        execution = await self._pinned(execution_id)
        try:
            yield execution
        finally:
            self.release(execution)

    def pin(self, execution: Execution) -> None:
        """Keep a loaded execution in memory until as many `release` calls."""
        execution.users += 1
        self._idle.pop(execution.id, None)
        self._settling.pop(execution.id, None)

    def release(self, execution: Execution) -> None:
        execution.users -= 1
        if execution.users == 0 and self.loaded.get(execution.id) is execution:
            self._make_idle(execution)

    def _make_idle(self, execution: Execution) -> None:
        self._idle[execution.id] = execution
        self._idle.move_to_end(execution.id)  # the most recently used
        if self.max_loaded is not None and len(self.loaded) > self.max_loaded:
            self._unload_idle()

    def _unload_idle(self) -> None:
        """Unload idle executions, least recently used first, until at most `max_loaded` are in memory. One
        with a commit still pending waits aside until it is done (`settled`)."""
        assert self.max_loaded is not None
        while self._idle and len(self.loaded) > self.max_loaded:
            execution_id, execution = self._idle.popitem(last=False)
            if execution.pending:
                self._settling[execution_id] = execution
            else:
                del self.loaded[execution_id]
                self.unloads += 1

    async def _pinned(self, execution_id: str) -> Execution:
        while (change := self._changing.get(execution_id)) is not None:
            await asyncio.shield(change)
        if self.leaseholder is not None and not self.leaseholder.alive and execution_id in self.loaded:
            await self.leaseholder.confirm()  # its lease may have been lost meanwhile (then it is unloaded)
            return await self._pinned(execution_id)
        execution = self.loaded.get(execution_id)
        if execution is not None:
            self.pin(execution)
            return execution
        load = self._loading.get(execution_id)
        if load is None:
            load = self._loading[execution_id] = _Load(asyncio.create_task(self._load(execution_id)))
            load.task.add_done_callback(_retrieve_exception)
        load.waiting += 1
        try:
            return await asyncio.shield(load.task)
        except BaseException:
            if not load.task.done():
                load.waiting -= 1  # cancelled while it loads: the load pins it for the others alone
            elif not load.task.cancelled() and load.task.exception() is None:
                self.release(load.task.result())  # cancelled once loaded and pinned for this caller
            raise

    async def _load(self, execution_id: str) -> Execution:
        try:
            execution = await self._recover(execution_id)
        finally:
            load = self._loading.pop(execution_id)
        execution.users = load.waiting  # pinned for each caller waiting, who releases it
        self.loaded[execution_id] = execution
        if not execution.users:
            self._make_idle(execution)
        return execution

    async def _recover(self, execution_id: str) -> Execution:
        lease, lease_epoch = self.leaseholder, None
        while True:
            if lease is not None:  # taken first: what the log holds then is final until this replica writes
                expiries = lease.expiries
                lease_epoch = await lease.take(execution_id)
                if lease_epoch is None:
                    _raise_not_found(execution_id)
            stored = await self._log.load_execution(execution_id, MAX_PATCH_IDS + 1)
            if lease is None or lease_epoch is None or await lease.still_held(execution_id, lease_epoch, expiries):
                break  # (else: the heartbeat expired meanwhile and the lease moved: look again)
        if stored is None:
            _raise_not_found(execution_id)
        record = stored.record
        schema = orjson.loads(record.schema_json)
        execution = Execution(execution_id, schema, record.created_at, self._window, self._max_base_lag)
        execution.recover(stored.snapshot, stored.revisions)
        execution.compacted = stored.compacted
        execution.keys.remember_older(stored.patch_ids)
        execution.observation_sequence = execution.observation_committed = stored.last_observation
        execution.lease_epoch = lease_epoch
        return execution

    def lease_epochs(self) -> dict[str, int]:
        """The epochs of the leases the executions in memory are held under."""
        return {i: e.lease_epoch for i, e in self.loaded.items() if e.lease_epoch is not None}


def _raise_not_found(execution_id: str) -> NoReturn:
    raise NotFoundError(f"execution {execution_id!r} not found")


def _retrieve_exception(task: asyncio.Task[Execution]) -> None:
    """Mark a failed load's error retrieved: its callers got it, and the next use tries again."""
    if not task.cancelled():
        task.exception()
