"""Fan-out of committed items to subscribers through bounded queues.

A subscriber that lets its queue fill is dropped, never skipped past: its next read raises
WatcherTooSlowError naming the last item it was given, so it can resume from there without a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

from ..errors import LimitExceededError, WatcherTooSlowError

T = TypeVar("T")
_CUT: Any = object()
"""Queued by `Subscription.cut` to wake its reader."""


class Subscription(Generic[T]):
    """One subscriber's queue; read with `get`."""

    __slots__ = ("_accepts", "_overflowed", "_queue", "key")

    def __init__(self, key: str, capacity: int, accepts: Callable[[T], bool] | None) -> None:
        self.key = key
        self._accepts = accepts
        self._queue: asyncio.Queue[T] = asyncio.Queue(capacity)
        self._overflowed = False

    def offer(self, item: T) -> bool:
        """Queue item if this subscriber wants it; False when the queue is full and the subscriber is lost."""
        if self._accepts is not None and not self._accepts(item):
            return True
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._overflowed = True
            return False
        return True

    def cut(self) -> None:
        """End the subscription once what is queued was read (waking a reader that waits on an empty queue)."""
        self._overflowed = True
        with contextlib.suppress(asyncio.QueueFull):  # a full queue has items to read first: no one waits
            self._queue.put_nowait(_CUT)

    async def get(self) -> T:
        """The next item; WatcherTooSlowError once everything queued before the overflow was read."""
        if self._overflowed and self._queue.empty():
            raise WatcherTooSlowError(f"fell more than {self._queue.maxsize} items behind")
        item = await self._queue.get()
        if item is _CUT:
            raise WatcherTooSlowError("cut: the execution restarted from a snapshot; resume from the last item")
        return item


class Hub(Generic[T]):
    """Subscribers grouped by key (an execution id), at most `max_per_key` in a group."""

    def __init__(self, capacity: int, max_per_key: int, what: str) -> None:
        self._capacity, self._max_per_key, self._what = capacity, max_per_key, what
        self._subscribers: dict[str, set[Subscription[T]]] = {}

    def subscribe(self, key: str, accepts: Callable[[T], bool] | None = None) -> Subscription[T]:
        """A new subscriber of key; LimitExceededError when key has as many as it may."""
        group = self._subscribers.setdefault(key, set())
        if len(group) >= self._max_per_key:
            raise LimitExceededError(
                f"{self._what}: execution {key!r} has {len(group)}, the limit is {self._max_per_key}"
            )
        subscription: Subscription[T] = Subscription(key, self._capacity, accepts)
        group.add(subscription)
        return subscription

    def count(self) -> int:
        """Subscribers in all."""
        return sum(len(group) for group in self._subscribers.values())

    def cut(self, key: str) -> None:
        """End every subscriber of key as if it had fallen behind: each resumes from its last item."""
        for subscription in self._subscribers.pop(key, set()):
            subscription.cut()

    def keys(self) -> set[str]:
        """The keys that have subscribers."""
        return set(self._subscribers)

    def unsubscribe(self, subscription: Subscription[T]) -> None:
        group = self._subscribers.get(subscription.key)
        if group is not None:
            group.discard(subscription)
            if not group:
                del self._subscribers[subscription.key]

    def publish(self, key: str, item: T) -> None:
        """Offer item to every subscriber of key; the ones that overflow are dropped from the hub."""
        group = self._subscribers.get(key)
        if not group:
            return
        lost = [subscription for subscription in group if not subscription.offer(item)]
        for subscription in lost:
            group.discard(subscription)


async def follow(
    subscription: Subscription[T], cursor: int, position: Callable[[T], int], stream: str, resume_field: str
) -> AsyncIterator[T]:
    """The items a subscription receives after `cursor`, for as long as it keeps up.

    A subscriber that fell behind gets WatcherTooSlowError saying where to resume (`resume_field`).
    """
    try:
        while True:
            item = await subscription.get()
            if position(item) > cursor:
                yield item
                cursor = position(item)
    except WatcherTooSlowError as e:
        raise WatcherTooSlowError(f"{stream} {e}; resume with {resume_field}={cursor}") from None
