"""A blocking wrapper around StateClient, for scripts and notebooks that do not run an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

from ._client import RetryPolicy, StateClient

T = TypeVar("T")


class SyncStateClient:
    """The same methods as StateClient, blocking; iterators are plain generators.

    Runs its own event loop, so it must not be used from inside a running one.
    """

    def __init__(
        self, target: str = "127.0.0.1:50051", *, retry: RetryPolicy = RetryPolicy(), timeout: float | None = 30.0
    ) -> None:
        self._runner = asyncio.Runner()
        self._client = self._runner.run(self._connect(target, retry, timeout))

    @staticmethod
    async def _connect(target: str, retry: RetryPolicy, timeout: float | None) -> StateClient:
        return StateClient(target, retry=retry, timeout=timeout)

    def __enter__(self) -> SyncStateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._runner.run(self._client.close())
        self._runner.close()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name in _STREAMS:
            return lambda *args, **kwargs: self._iterate(method(*args, **kwargs))
        return lambda *args, **kwargs: self._runner.run(method(*args, **kwargs))

    def _iterate(self, stream: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self._runner.run(anext(stream))  # type: ignore[arg-type]
                except StopAsyncIteration:
                    return
        finally:
            self._runner.run(stream.aclose())  # type: ignore[attr-defined]


_STREAMS = frozenset({"watch", "history", "observations"})
