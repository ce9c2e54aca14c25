"""Waiting for something to happen in a test: on the thing itself where it can be seen, else by polling it
with a deadline, never by sleeping a guessed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(check: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.01) -> T:
    """Call `check` (a function or a coroutine function) until it returns something true, and return that;
    fail the test if `timeout` seconds pass first. A generous timeout costs nothing when things work."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout} s: {getattr(check, '__qualname__', check)}")
        await asyncio.sleep(interval)
