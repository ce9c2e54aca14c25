"""Fan-out of committed items to subscribers through bounded queues.

A subscriber that lets its queue fill is dropped, never skipped past: its next read raises
WatcherTooSlowError naming the last item it was given, so it can resume from there without a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any, Generic, TypeVar

from ..errors import LimitExceededError, StateError, WatcherTooSlowError

T = TypeVar("T")
U = TypeVar("U")
_CUT: Any = object()
"""Queued by `Subscription.cut` to wake its reader."""
NUDGE: Any = object()
"""Queued by `Subscription.nudge`, and returned by `get`, to wake a reader without an item."""


class Subscription(Generic[T]):
    """One subscriber's queue; read with `get`."""

    __slots__ = ("_accepts", "_ending", "_queue", "key")

    def __init__(self, key: str, capacity: int, accepts: Callable[[T], bool] | None) -> None:
        self.key = key
        self._accepts = accepts
        self._queue: asyncio.Queue[T] = asyncio.Queue(capacity)
        self._ending: StateError | None = None
        """What the reader gets once it has read what was queued: the subscription fell behind, or was cut."""

    def empty(self) -> bool:
        """Whether nothing is queued: a read would wait."""
        return self._queue.empty()

    def nudge(self) -> None:
        """Wake a reader waiting on an empty queue: its `get` returns NUDGE (nothing happens if items wait)."""
        if self._queue.empty():
            self._queue.put_nowait(NUDGE)

    def offer(self, item: T) -> bool:
        """Queue item if this subscriber wants it; False when the queue is full and the subscriber is lost."""
        if self._accepts is not None and not self._accepts(item):
            return True
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._ending = WatcherTooSlowError(f"fell more than {self._queue.maxsize} items behind")
            return False
        return True

    def cut(self, error: StateError | None = None) -> None:
        """End the subscription once what is queued was read (waking a reader that waits on an empty queue):
        with `error`, or by default as if it had fallen behind (its reader resumes from its last item)."""
        self._ending = error or WatcherTooSlowError(
            "cut: the execution restarted from a snapshot; resume from the last item"
        )
        with contextlib.suppress(asyncio.QueueFull):  # a full queue has items to read first: no one waits
            self._queue.put_nowait(_CUT)

    async def get(self) -> T:
        """The next item; once everything queued before an overflow or a cut was read, its error."""
        if self._ending is not None and self._queue.empty():
            raise self._ending
        item = await self._queue.get()
        if item is _CUT:
            assert self._ending is not None, "cut sets the ending first"
            raise self._ending
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

    def cut(self, key: str, error: StateError | None = None) -> None:
        """End every subscriber of key with `error`, or as if it had fallen behind (each resumes from its last
        item)."""
        for subscription in self._subscribers.pop(key, set()):
            subscription.cut(error)

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
    subscription: Subscription[T],
    cursor: int,
    position: Callable[[T], int],
    stream: str,
    resume_field: str,
    idle: Callable[[int], U | None] | None = None,
    idle_after: float = 0.0,
) -> AsyncGenerator[T | U, None]:
    """The items a subscription receives after `cursor`, for as long as it keeps up.

    A subscriber that fell behind gets WatcherTooSlowError saying where to resume (`resume_field`). With
    `idle`, `idle(cursor)` is yielded (unless it is None) each time `idle_after` seconds pass in which nothing
    was yielded and nothing waits in the queue. One timer per stream does it, armed once per `idle_after`
    whatever the traffic: a timeout on each wait would cost a timer per item.
    """
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    timer: asyncio.TimerHandle | None = None

    def wake() -> None:
        nonlocal timer
        left = quiet_since + idle_after - loop.time()
        if left > 0 or not subscription.empty():  # items went out since, or are on their way: not idle
            timer = loop.call_later(left if left > 0 else idle_after, wake)
        else:
            timer = None
            subscription.nudge()

    if idle is not None:
        timer = loop.call_later(idle_after, wake)
    try:
        while True:
            item = await subscription.get()
            if item is NUDGE:
                assert idle is not None
                left = quiet_since + idle_after - loop.time()
                if left <= 0:
                    mark = idle(cursor)
                    if mark is not None:
                        yield mark
                    quiet_since, left = loop.time(), idle_after
                timer = loop.call_later(left, wake)
            elif position(item) > cursor:
                yield item
                cursor = position(item)
                quiet_since = loop.time()
    except WatcherTooSlowError as e:
        raise WatcherTooSlowError(f"{stream} {e}; resume with {resume_field}={cursor}") from None
    finally:
        if timer is not None:
            timer.cancel()
