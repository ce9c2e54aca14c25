"""Following execution owners: replicas on one PostgreSQL database give each execution one owning replica
(docs/deployment.md). By default a replica forwards a call for an execution it does not own to the owner;
a client that follows owners asks to be redirected instead (ROUTE_METADATA), learns the owner's address from
the `NOT_OWNER` error's details, and calls the owner directly from then on, saving a hop per call."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable
from typing import Any

import grpc

from ._errors import SkillstateError, UnavailableError

ROUTE_METADATA = (("skillstate-route", "redirect"),)
"""Sent with every call of a client that follows owners: a replica that does not own the execution answers
UNAVAILABLE `NOT_OWNER` with `owner_address` instead of forwarding the call."""
MAX_REDIRECTS = 3
"""Redirects in a row one stream follows before it counts a failure (two replicas that disagree for a moment
about an owner must not bounce it forever)."""
FAILED_SECONDS = 5.0
"""How long an owner that could not be reached is not followed again (a lease outlives its owner by 3 s by
default): calls go to the client's target, which takes the execution over."""
MAX_CHANNELS = 16
"""Channels to owners kept open beyond those some execution is owned at."""
MAX_KNOWN = 4096
"""Executions whose owner a client remembers (the least recently used are forgotten, and asked for again)."""


class Owners:
    """The owner of each execution a client called, and one stub per owner's address."""

    def __init__(self, default: Any, open_stub: Callable[[str], tuple[Any, grpc.aio.Channel]]) -> None:
        """`default` is the stub of the client's own target; `open_stub(address)` a stub on a new channel."""
        self._default, self._open_stub = default, open_stub
        self._owner: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._stubs: dict[str, tuple[Any, grpc.aio.Channel]] = {}
        self._failed: dict[str, float] = {}
        """Owners' addresses that could not be reached, and when: not followed again for FAILED_SECONDS."""
        self._closing: set[asyncio.Future[None]] = set()

    def stub(self, execution_id: str) -> Any:
        """The stub to call for the execution: its owner's when known, else the client's target."""
        address = self._owner.get(execution_id)
        if address is None:
            return self._default
        self._owner.move_to_end(execution_id)
        if address not in self._stubs:
            self._stubs[address] = self._open_stub(address)
        return self._stubs[address][0]

    def learn(self, execution_id: str, error: SkillstateError, stub: Any) -> bool:
        """After a call on `stub` failed with `error`: True when it names the execution's owner, to call at
        once. An owner that could not be reached is forgotten, and not followed again for FAILED_SECONDS (nor
        one that names itself: restarted, it still holds the leases of its previous life for a while): calls
        go to the client's target meanwhile, which takes the execution over once that owner's lease expires."""
        address = error.metadata.get("owner_address") if error.reason == "NOT_OWNER" else None
        now = time.monotonic()
        if (
            address
            and address != self._address_of(stub)
            and now - self._failed.get(address, -math.inf) >= FAILED_SECONDS
        ):
            self._owner[execution_id] = address
            self._owner.move_to_end(execution_id)
            while len(self._owner) > MAX_KNOWN:
                self._owner.popitem(last=False)
            self._close_unused()
            return True
        if isinstance(error, UnavailableError) and stub is not self._default:
            failed = self._owner.pop(execution_id, None)
            if failed is not None:
                self._failed[failed] = now
        return False

    async def close(self) -> None:
        stubs, self._stubs = self._stubs, {}
        for _, channel in stubs.values():
            await channel.close()
        await asyncio.gather(*self._closing)

    def _address_of(self, stub: Any) -> str | None:
        return next((address for address, (known, _) in self._stubs.items() if known is stub), None)

    def _close_unused(self) -> None:
        """Close the channels to addresses no execution is owned at any more, once there are many."""
        if len(self._stubs) <= MAX_CHANNELS:
            return
        used = set(self._owner.values())
        for address in [a for a in self._stubs if a not in used]:
            _, channel = self._stubs.pop(address)
            closing = asyncio.ensure_future(channel.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
