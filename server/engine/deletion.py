"""Deleting an execution whole, and forgetting one the log no longer holds (deleted by another server).

A delete first stops writes to the execution (`Execution.deleted`: merges and publishes are refused from
then on, and a stream that subscribes is refused too), waits for what was merged or published before it to
be committed or to fail, removes every row of it in one transaction, then drops it from memory and ends its
watches, observation streams and consumer groups NOT_FOUND. It runs to its end even if its caller goes away,
and a delete that fails lets writes in again.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import NotFoundError
from ..storage.records import RevisionRecord
from ..storage.revision_log.base import RevisionLog
from .committer import GroupCommitter
from .execution import Execution
from .executions import Executions
from .hub import Hub
from .observations import Observations

log = logging.getLogger(__name__)


class Deletions:
    """Deletes executions, and forgets those deleted elsewhere."""

    def __init__(
        self,
        log_: RevisionLog,
        executions: Executions,
        committer: GroupCommitter[Execution],
        revisions: Hub[RevisionRecord],
        observations: Observations,
    ) -> None:
        self._log, self._executions, self._committer = log_, executions, committer
        self._revisions: Hub[RevisionRecord] = revisions
        self._observations = observations

    async def delete(self, execution_id: str) -> int:
        """Remove an execution whole; returns the head revision removed (StateEngine.delete_execution)."""
        return await asyncio.shield(self._delete(execution_id))  # a caller's deadline leaves no half delete

    async def _delete(self, execution_id: str) -> int:
        if not self._executions.holds(execution_id) and self._executions.leaseholder is None:
            # nothing of it in memory: no need to load it first (under leases, it is loaded to take its lease)
            async with self._executions.changing(execution_id):  # nor may anything load it meanwhile
                head = await self._log.delete_execution(execution_id)
        else:
            async with self._executions.use(execution_id) as execution:
                execution.deleted = True
                try:
                    await self._committer.drain(execution)
                    head = await self._log.delete_execution(execution_id, execution.lease_epoch)
                except BaseException:
                    execution.deleted = False  # still there: writes go on
                    raise
                self.forget(execution)
        log.info("deleted execution %r at revision %d", execution_id, head)
        return head

    async def forget_if_deleted(self, execution_id: str) -> None:
        """Forget this server's copy of an execution if the (shared) log no longer holds it: deleted by another
        server whose notice has not arrived yet, so that its id may be created here again."""
        if await self._log.find_execution(execution_id) is not None:
            return
        execution = self._executions.loaded.get(execution_id)
        if execution is not None:
            self.forget(execution)
        else:
            self._executions.forget(execution_id)  # listed, never loaded

    def forget(self, execution: Execution) -> None:
        """The log no longer holds `execution`: drop it, and end its watches and observation streams. Does
        nothing to an execution created again under its id since."""
        execution.deleted = True  # a merge still holding it must not commit into a new one of the same id
        if self._executions.loaded.get(execution.id) is not execution:
            return
        self._executions.forget(execution.id)
        gone = NotFoundError(f"execution {execution.id!r} was deleted")
        self._revisions.cut(execution.id, gone)
        self._observations.end(execution.id, gone)
