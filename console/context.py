"""What every request handler shares: the server it reads, and whether the console is stopping."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.requests import Request

from .upstream import Upstream


@dataclass(frozen=True, slots=True)
class Console:
    upstream: Upstream
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the console begins to stop: its event streams end at once, so that stopping waits for none."""


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console
