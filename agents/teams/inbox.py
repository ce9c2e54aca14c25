"""A team agent's inbox: its link's observations, read as they come (so that the world's `done` is known even
behind a backlog) and handed out one at a time, with a time limit: the outcomes of its own actions first, so
that an agent takes back a failed action's record before it takes up new work (others read that record
meanwhile), then the rest in the order they came."""

from __future__ import annotations

import asyncio
import itertools
from types import TracebackType

from skillstate.clients import Observation

from ..runtime.transport import Link

START, EVENT, OUTCOME, DONE = "start", "event", "outcome", "done"
"""The kinds of observation a timed run publishes (sims/concurrent.py, envs/timed_driver.py)."""


class Inbox:
    def __init__(self, link: Link) -> None:
        self._link = link
        self._queue: asyncio.PriorityQueue[tuple[int, int, Observation | BaseException]] = asyncio.PriorityQueue()
        self._arrival = itertools.count()
        self._reader: asyncio.Task[None] | None = None
        self.world_done = False
        """The world said it is done (its observation may still wait behind others)."""

    async def __aenter__(self) -> Inbox:
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._reader is not None:
            self._reader.cancel()

    async def next(self, timeout: float | None) -> Observation | None:
        """The next observation, or None after `timeout` seconds (None: wait as long as it takes); the link's
        failure is raised here."""
        try:
            _, _, item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def _read(self) -> None:
        try:
            async for observation in self._link.observations():
                self.world_done = self.world_done or observation.kind == DONE
                await self._queue.put((0 if observation.kind == OUTCOME else 1, next(self._arrival), observation))
        except Exception as error:  # `next` raises it, at once
            await self._queue.put((-1, next(self._arrival), error))
