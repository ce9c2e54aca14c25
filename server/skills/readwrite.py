"""A readers-writer lock for asyncio tasks: many readers at once, or one writer alone.

The registry's indexes are read by hydrations in worker threads and changed by registrations (also in a
worker thread, since maintaining the macros of a large library takes seconds): while a writer holds the
lock no reader runs, so every reader sees the library as one registration left it. A waiting writer goes
before readers that arrive after it, so a stream of hydrations cannot hold off a registration forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ReadWriteLock:
    def __init__(self) -> None:
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._writing and not self._writers_waiting)
            self._readers += 1
        try:
            yield
        finally:
            async with self._changed:
                self._readers -= 1
                self._changed.notify_all()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        async with self._changed:
            self._writers_waiting += 1
            try:
                await self._changed.wait_for(lambda: not self._writing and not self._readers)
            except BaseException:
                self._writers_waiting -= 1
                self._changed.notify_all()  # readers held back for this writer may go
                raise
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            async with self._changed:
                self._writing = False
                self._changed.notify_all()
