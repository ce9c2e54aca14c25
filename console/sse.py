"""Server-sent events: framing, keep-alives, and ending a stream when the browser goes away or the console
stops.

`EventStream` is a response of its own rather than Starlette's StreamingResponse because it must notice a
browser that left while nothing is being sent (an idle execution sends nothing for hours): it listens for
`http.disconnect` beside the events, and ends both, closing the upstream gRPC stream, as soon as either ends
or the console begins to stop. Events go through a small queue, so a browser that reads slowly holds the
upstream stream back (gRPC flow control, then the server's own bound on a slow watcher) instead of letting
events pile up here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .errors import error_body
from .shapes import dumps

log = logging.getLogger(__name__)

KEEPALIVE = 15.0
"""Seconds of silence after which a comment line is sent, so that proxies keep an idle stream open."""
RETRY_MS = 2000
"""How long the browser waits before it reconnects a stream that ended (EventSource's `retry`)."""
QUEUED = 64
"""Events read from upstream and not yet sent, at most."""


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its type (the browser's `addEventListener` name), its data as JSON, and its id (the
    revision or sequence a reconnecting browser resumes after, sent back as Last-Event-ID)."""

    name: str
    data: Any
    id: int | None = None

    def frame(self) -> bytes:
        head = f"id: {self.id}\n" if self.id is not None else ""
        return f"{head}event: {self.name}\ndata: ".encode() + dumps(self.data) + b"\n\n"  # orjson: one line


class EventStream(Response):
    """Streams `events` as text/event-stream until they end, the browser disconnects or `closing` is set."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[Event, None], closing: asyncio.Event) -> None:
        self._events, self._closing = events, closing
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode(), "more_body": True})
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUED)
        pump = asyncio.create_task(self._pump(queue))
        write = asyncio.create_task(_write(queue, send))
        gone = asyncio.create_task(_disconnected(receive))
        stopping = asyncio.create_task(self._closing.wait())
        tasks = (pump, write, gone, stopping)
        try:
            await asyncio.wait((write, gone, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        failed = write.exception() if write.done() and not write.cancelled() else None
        if failed is not None and not isinstance(failed, OSError):
            log.error("an event stream failed to write", exc_info=failed)
        if not gone.cancelled() and gone.done():
            return  # nobody to tell that it ended
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self, queue: asyncio.Queue[bytes | None]) -> None:
        try:
            async with contextlib.aclosing(self._events) as events:
                async for event in events:
                    await queue.put(event.frame())
        except Exception:
            log.exception("an event stream failed")
            await queue.put(Event("failure", error_body("INTERNAL", "the console failed; see its log")).frame())
        await queue.put(None)


async def _write(queue: asyncio.Queue[bytes | None], send: Send) -> None:
    while True:
        try:
            chunk = await asyncio.wait_for(queue.get(), KEEPALIVE)
        except TimeoutError:
            chunk = b": keep-alive\n\n"
        if chunk is None:
            return
        await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
