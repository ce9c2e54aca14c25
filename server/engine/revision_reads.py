"""Reading an execution's revisions: Watch (history, then live revisions as they commit) and GetHistory pages."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from ..errors import InvalidArgumentError
from ..storage.records import RevisionRecord
from .config import EngineConfig
from .executions import Executions
from .hub import Hub, follow
from .replicas import Replicas
from .results import HistoryPage, WatchProgress, WatchSnapshot
from .timeline import Timeline

PAGE_MARGIN = 64 << 10
"""Bytes of a GetHistory reply kept for what is not the revisions' JSON (framing, ids, hashes)."""


class RevisionReads:
    """Serves StateEngine.watch and StateEngine.history."""

    def __init__(
        self,
        executions: Executions,
        revisions: Hub[RevisionRecord],
        replicas: Replicas,
        timeline: Timeline,
        config: EngineConfig,
    ) -> None:
        self._executions = executions
        self._revisions = revisions
        self._replicas = replicas
        self._timeline = timeline
        self._config = config
        self._limits = config.limits

    async def watch(
        self, execution_id: str, from_revision: int
    ) -> AsyncGenerator[RevisionRecord | WatchSnapshot | WatchProgress, None]:
        """Every revision after from_revision, in order, exactly once, then live ones as they commit; and,
        once caught up, a WatchProgress after each `progress_interval` seconds in which nothing else came."""
        async with self._executions.use(execution_id) as execution:
            if from_revision < 0:
                raise InvalidArgumentError(f"from_revision: must be >= 0, got {from_revision}")
            await self._replicas.refresh(execution)

            def progress(sent: int) -> WatchProgress | None:
                # committed past what was sent: a revision is on its way (queued behind the timer's nudge)
                return WatchProgress(execution.committed) if execution.committed <= sent else None

            subscription = self._revisions.subscribe(execution.id)  # before reading history: no gap, no await
            caught_up_to = execution.committed
            cursor = from_revision
            try:
                execution.refuse_if_deleted()
                if cursor < execution.compacted:
                    view = await self._timeline.view(execution, execution.compacted)
                    yield WatchSnapshot(view.revision, view.state_json, view.state_hash, execution.compacted)
                    cursor = execution.compacted
                while cursor < caught_up_to:
                    for record in await self._timeline.records(execution, cursor, caught_up_to, 512):
                        yield record
                        cursor = record.revision
                live = follow(
                    subscription, cursor, lambda r: r.revision, "watch", "from_revision",
                    progress, self._config.progress_interval,
                )  # fmt: skip
                async with contextlib.aclosing(live) as items:  # its timer is cancelled with the watch
                    async for item in items:
                        yield item
            finally:
                self._revisions.unsubscribe(subscription)

    async def history(
        self, execution_id: str, from_revision: int, to_revision: int, page_size: int, after: int | None = None
    ) -> HistoryPage:
        """A page of committed revisions from from_revision (or after `after`, continuing a page) through
        to_revision (0: the head)."""
        if page_size < 0:
            raise InvalidArgumentError(f"page_size: must be >= 0, got {page_size}")
        if from_revision < 0 or to_revision < 0:
            raise InvalidArgumentError(f"from_revision, to_revision: must be >= 0, got {from_revision}, {to_revision}")
        if to_revision and from_revision > to_revision:
            raise InvalidArgumentError(f"to_revision: {to_revision} is before from_revision {from_revision}")
        if after is not None and after < 0:
            raise InvalidArgumentError(f"after: must be >= 0, got {after}")
        size = min(page_size or 100, self._limits.max_history_page)
        async with self._executions.use(execution_id) as execution:
            await self._replicas.refresh(execution)
            head = execution.committed
            last = min(to_revision or head, head)
            after = max(max(from_revision, 1) - 1 if after is None else after, execution.compacted)
            records = await self._timeline.records(execution, after, last, size) if after < last else []
            records = _within(records, self._limits.max_message_bytes - PAGE_MARGIN)
            more = bool(records) and records[-1].revision < last
            return HistoryPage(records, more, head, execution.compacted)


def _within(records: list[RevisionRecord], budget: int) -> list[RevisionRecord]:
    """The first records whose replies fit in `budget` bytes (at least one: a revision always fits alone)."""
    for count, record in enumerate(records):
        json_texts = (record.applied_patch_json, record.action_json, record.resolutions_json)
        budget -= sum(len(text.encode()) for text in json_texts) + 256
        if budget < 0:
            return records[: max(count, 1)]
    return records
