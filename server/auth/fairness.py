"""Fair admission: calls run in a bounded number of seats, and identities take turns for them.

Served in arrival order, one identity keeping hundreds of calls in flight made every other identity's
call wait behind all of them. Here each identity's waiting calls form a queue of their own, and a free
seat goes to the waiting identity that holds the fewest seats (ties: in turn, round robin), as
Kubernetes' API Priority and Fairness shares one priority level: a flood waits behind itself, and a quiet
identity's call goes before the flooder's queued ones. A streamed message takes its turn the same way
(`turn`), without holding a seat while its stream waits for something to send.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

DEFAULT_SEATS = 64
"""Calls of all identities running at once; more wait for a seat, in their identity's queue."""


class FairQueue:
    """Seats shared by every identity; `seat(key)` waits for one in the queue of identity `key`."""

    def __init__(self, seats: int = DEFAULT_SEATS) -> None:
        if seats < 1:
            raise ValueError(f"seats: must be >= 1, got {seats}")
        self._seats = seats
        self.busy = 0
        """Seats held."""
        self._held: collections.Counter[str] = collections.Counter()
        """Seats held, by identity."""
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}
        """Each identity's waiting calls, oldest first; identities in turn order (served ones go to the back)."""

    def seat_free(self) -> bool:
        """Whether `seat` or `turn` would be granted without waiting, whoever asks."""
        return self.busy < self._seats and not self._waiting

    def waiting(self, key: str) -> int:
        queue = self._waiting.get(key)
        return len(queue) if queue else 0

    @asynccontextmanager
    async def seat(self, key: str) -> AsyncIterator[None]:
        """Hold a seat for the body; waits, in turn, while every seat is taken."""
        await self._take(key)
        try:
            yield
        finally:
            self._give_back(key)

    async def turn(self, key: str) -> None:
        """Wait for this identity's turn for a seat, and give it back at once (one streamed message)."""
        if self.seat_free():
            return  # a seat taken and given back at once would change nothing
        await self._take(key)
        self._give_back(key)

    async def _take(self, key: str) -> None:
        if self.busy < self._seats and not self._waiting:
            self._hold(key)
            return
        granted = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, collections.deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._give_back(key)  # the seat came as the caller went away: pass it on
            else:
                self._forget(key, granted)
            raise

    def _hold(self, key: str) -> None:
        self._held[key] += 1
        self.busy += 1

    def _give_back(self, key: str) -> None:
        self._held[key] -= 1
        if not self._held[key]:
            del self._held[key]
        self.busy -= 1
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.busy < self._seats:
            key = min(self._waiting, key=lambda k: self._held[k])  # ties: the first in turn
            queue = self._waiting.pop(key)
            granted = queue.popleft()
            if queue:
                self._waiting[key] = queue  # to the back of the turn
            if not granted.done():
                self._hold(key)
                granted.set_result(None)

    def _forget(self, key: str, granted: asyncio.Future[None]) -> None:
        """Take a cancelled call out of its queue, unless a grant already passed over it."""
        queue = self._waiting.get(key)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[key]
