"""Group commit: every revision and observation waiting when a transaction starts goes into it.

Callers are answered only after their item's transaction committed. While one transaction is in flight
the next batch accumulates, so throughput rises with concurrency at one fsync per batch. If a commit
fails, the owner hears which executions it held (to roll them back to their durable heads, which bumps
their epoch), and anything merged on top of the failed revisions fails too: nothing that was not made
durable is ever acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from ..errors import DuplicateRowError, FencedError, NotFoundError, RolledBackError, StorageError
from ..metrics import NO_METRICS, Metrics
from ..storage.records import Batch, ObservationRecord, RevisionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog

log = logging.getLogger(__name__)


class Versioned(Protocol):
    """What an item is committed for: an execution whose epoch changes when it rolls back."""

    @property
    def id(self) -> str: ...

    @property
    def epoch(self) -> int: ...

    @property
    def lease_epoch(self) -> int | None: ...


E = TypeVar("E", bound=Versioned)


@dataclass(slots=True)
class Pending(Generic[E]):
    """One item waiting to be made durable, and the future its caller awaits."""

    execution: E
    epoch: int
    """The execution's epoch when the item was merged: if it changed, what the item was merged on is gone."""
    revision: RevisionRecord | None = None
    snapshot: SnapshotRecord | None = None
    observation: ObservationRecord | None = None
    future: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    """Awaited by the caller that enqueued the item (cancelled with it if that caller goes away)."""
    followers: list[asyncio.Future[None]] | None = None
    listener: Callable[[Exception | None], None] | None = None
    """Called with the item's outcome as soon as it is known, from the group commit itself: without the turn
    of the event loop a future's callback waits for (a Session answers its submits this way)."""

    def follow(self) -> asyncio.Future[None]:
        """A future of this item's outcome for another caller (a retry under the same idempotency key)."""
        follower = asyncio.get_running_loop().create_future()
        if self.followers is None:
            self.followers = []
        self.followers.append(follower)
        return follower

    def resolve(self, error: Exception | None = None) -> None:
        listener, self.listener = self.listener, None  # told once
        if listener is not None:
            try:
                listener(error)
            except Exception:  # the commit goes on for the other items
                log.exception("a listener of a group commit's item failed")
        for future in (self.future, *(self.followers or ())):
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
                future.exception()  # mark retrieved: a caller that went away must not log "never retrieved"


class GroupCommitter(Generic[E]):
    """Owns the single writer task. `on_committed` runs for each item, in order, after its commit;
    `on_failed` runs once with the executions of a batch that failed to commit, before their callers hear."""

    def __init__(
        self,
        log_: RevisionLog,
        on_committed: Callable[[Pending[E]], None],
        on_failed: Callable[[list[E]], None],
        max_batch: int = 1024,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self._log = log_
        self._metrics = metrics
        self._on_committed = on_committed
        self._on_failed = on_failed
        self._max_batch = max_batch
        self._queue: list[Pending[E]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.storage_ok = True
        """False from a commit that failed until one succeeds again (losing a race to another server is no failure)."""
        self.on_fenced: Callable[[dict[str, int]], None] | None = None
        """Called with the executions whose leases another replica took (id -> the epoch this replica had),
        when a commit finds it out."""
        self.on_storage_health: Callable[[bool], None] | None = None
        """Called with `storage_ok` each time it changes (health checking turns NOT_SERVING and back)."""

    @property
    def queue_depth(self) -> int:
        """Items waiting for the next group commit."""
        return len(self._queue)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="skillstate-group-commit")

    async def close(self) -> None:
        """Commit what is queued, then stop."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task

    def check_open(self) -> None:
        """Raise StorageError once closing: nothing more will be committed."""
        if self._closing:
            raise StorageError("the server is shutting down")

    async def drain(self, execution: E) -> None:
        """Return once every item queued before this call was committed or failed (a marker is queued
        behind them: batches are committed in the order they were queued)."""
        marker = Pending(execution, execution.epoch)
        self.enqueue(marker)
        with contextlib.suppress(StorageError):  # failed: what was before it failed too, which is all it waits for
            await marker.future

    def enqueue(self, item: Pending[E]) -> None:
        self.check_open()
        self._queue.append(item)
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            await asyncio.sleep(0)  # one more turn of the loop: requests ready to merge join this batch
            self._wakeup.clear()
            while self._queue:
                batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                await self._commit(batch)
            if self._closing:
                return

    async def _commit(self, items: list[Pending[E]]) -> None:
        live = []
        for item in items:
            if item.epoch == item.execution.epoch:
                live.append(item)
            else:
                item.resolve(RolledBackError("not committed: an earlier revision it was merged on failed to commit"))
        batch = Batch(
            revisions=[i.revision for i in live if i.revision is not None],
            snapshots=[i.snapshot for i in live if i.snapshot is not None],
            observations=[i.observation for i in live if i.observation is not None],
            fence={i.execution.id: i.execution.lease_epoch for i in live if i.execution.lease_epoch is not None},
        )
        if not batch:  # markers only (`drain`)
            for item in live:
                item.resolve()
            return
        started = time.perf_counter()
        try:
            await self._log.commit(batch)
        except FencedError as e:  # nothing is durable; what was merged into executions still owned goes again
            fenced = e.epochs
            lost = [item for item in live if item.execution.id in fenced]
            self._metrics.race_lost()
            log.info("a group commit held %d executions another replica took over", len(fenced))
            self._on_failed(list({id(i.execution): i.execution for i in lost}.values()))
            if self.on_fenced is not None:
                self.on_fenced(fenced)
            for item in lost:
                item.resolve(e)
            await self._commit([item for item in live if item.execution.id not in fenced])
            return
        except Exception as e:  # any failure means nothing in the batch is durable
            raced = isinstance(e, DuplicateRowError | NotFoundError) and self._log.shared
            if raced:  # another server committed first, or deleted an execution of the batch
                self._metrics.race_lost()
                log.info("group commit of %d items lost a race to another server: %s", len(live), e)
            else:
                log.error("group commit of %d items failed: %s", len(live), e)
                self._storage_health(False)
            self._on_failed(list({id(i.execution): i.execution for i in live}.values()))
            if isinstance(e, NotFoundError) and raced:  # its writers merge again, and learn which was deleted
                error: StorageError = RolledBackError(f"not committed: an execution was deleted meanwhile ({e})")
            else:
                error = e if isinstance(e, StorageError) else StorageError(f"commit failed: {e}")
            for item in live:
                item.resolve(error)
            return
        self._metrics.committed(len(batch.revisions), len(batch.observations), time.perf_counter() - started)
        self._storage_health(True)
        for item in live:
            self._on_committed(item)
            item.resolve()

    def _storage_health(self, ok: bool) -> None:
        if ok != self.storage_ok:
            self.storage_ok = ok
            if self.on_storage_health is not None:
                self.on_storage_health(ok)
