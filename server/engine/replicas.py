"""Replicas on a shared log (PostgreSQL): this server's executions in memory are a cache of the log, which
other servers commit to as well. This module keeps that cache current: a read at head, a stale-looking
base, a watch or an observation stream catches up first, and executions with open streams follow the
others' commits as they are noticed (and every FOLLOW_INTERVAL seconds, in case a notice was lost)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..errors import CorruptLogError, NotFoundError, StorageError
from ..storage.records import RevisionRecord
from ..storage.revision_log.base import RevisionLog
from .execution import Execution
from .executions import Executions
from .hub import Hub
from .observations import Observations

log = logging.getLogger(__name__)

FOLLOW_INTERVAL = 1.0
"""Seconds between catch-ups of streamed executions on a shared log when no notice arrives."""


class Replicas:
    """Catches this server's executions up with a shared log; does nothing on a log of this server's own."""

    def __init__(
        self,
        log_: RevisionLog,
        executions: Executions,
        revisions: Hub[RevisionRecord],
        observations: Observations,
        on_deleted: Callable[[Execution], None],
    ) -> None:
        """`on_deleted(execution)` is called when the log no longer holds an execution this server does
        (another server deleted it)."""
        self._log = log_
        self._on_deleted = on_deleted
        self._executions = executions
        self._revisions = revisions
        self._observations = observations
        self._follower: asyncio.Task[None] | None = None

    def start(self, leased: bool) -> None:
        """Follow other servers' commits on a shared log, unless leases make each execution one server's."""
        if self._log.shared and not leased:
            self._follower = asyncio.create_task(self._follow(), name="skillstate-follow")

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    def racing(self, execution: Execution) -> bool:
        """Whether other servers may commit to the execution too: on a shared log, unless this server holds
        its lease (then its memory is the truth, and every commit of another is fenced)."""
        return self._log.shared and execution.lease_epoch is None

    async def refresh(self, execution: Execution, observations: bool = False) -> None:
        """Catch up with what other servers committed to a shared log: revisions (handed to this server's
        watchers as if committed here), and with `observations` the observations too. Nothing to do on a
        log of this server's own, or for an execution it holds the lease of."""
        if not self.racing(execution):
            return
        try:
            await self._refresh(execution, observations)
        except NotFoundError:  # another server deleted it
            self._on_deleted(execution)
            raise

    async def _refresh(self, execution: Execution, observations: bool) -> None:
        execution.refresh_requests += 1
        ticket = execution.refresh_requests
        async with execution.refreshing:
            if execution.refreshed_through >= ticket and not observations:
                return  # a catch-up that began after this call arrived has just run: it serves this call too
            serving = execution.refresh_requests
            while True:
                while execution.head.revision > execution.committed:  # let local commits settle first
                    await execution.settled(execution.head.revision)
                read = await self._log.read_revisions(execution.id, after=execution.committed, limit=1024)
                if execution.head.revision > execution.committed:
                    continue  # a local merge started meanwhile: it commits or rolls back, then look again
                if read and read[0].revision > execution.committed + 1:  # compacted past this server's head
                    await self._restart_from_snapshot(execution)
                    continue
                for record in execution.catch_up(read):
                    self._revisions.publish(execution.id, record)
                if len(read) < 1024:
                    break
            execution.refreshed_through = serving
            if not observations:
                return
            for observation in await self._log.read_observations(execution.id, after=execution.observation_committed):
                if observation.sequence > execution.observation_committed:
                    execution.observation_sequence = max(execution.observation_sequence, observation.sequence)
                    self._observations.committed(execution, observation)

    async def _restart_from_snapshot(self, execution: Execution) -> None:
        """Another server compacted the log past this one's head: start over from the newest snapshot. This
        server's watchers of the execution are cut, to resume from their last revision (they then get the
        snapshot, as any watcher from before a compaction does)."""
        snapshot = await self._log.latest_snapshot(execution.id)
        if snapshot is None or snapshot.revision <= execution.committed:
            raise CorruptLogError(f"execution {execution.id!r}: revisions after {execution.committed} are missing")
        records = await self._log.read_revisions(execution.id, after=snapshot.revision)
        execution.compacted = await self._log.compact_revision(execution.id)
        execution.restart_from(snapshot, records)
        self._revisions.cut(execution.id)

    async def _follow(self) -> None:
        """Keep the executions this server streams current with a shared log: at once when the log says
        another server committed, and every FOLLOW_INTERVAL seconds in case a notice was lost."""
        changed: asyncio.Queue[str] = asyncio.Queue()

        async def listen() -> None:
            async for execution_id in self._log.changes():
                changed.put_nowait(execution_id)

        listener = asyncio.create_task(listen(), name="skillstate-follow-notices")
        try:
            while True:
                try:
                    named = {await asyncio.wait_for(changed.get(), FOLLOW_INTERVAL)}
                    while not changed.empty():
                        named.add(changed.get_nowait())
                except TimeoutError:
                    named = self._revisions.keys() | self._observations.streamed()
                for execution_id in named:
                    execution = self._executions.loaded.get(execution_id)
                    if execution is None:
                        continue  # not in memory: it is read from the log when next used
                    self._executions.pin(execution)
                    try:
                        await self.refresh(execution, observations=True)
                    except NotFoundError:
                        pass  # deleted by another server: forgotten, and its streams ended
                    except StorageError as e:
                        log.warning("could not catch up execution %r: %s", execution_id, e)
                    finally:
                        self._executions.release(execution)
        finally:
            listener.cancel()
