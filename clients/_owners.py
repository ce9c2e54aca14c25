"""Following execution owners: replicas on one PostgreSQL database give each execution one owning replica
(docs/deployment.md). By default a replica forwards a call for an execution it does not own to the owner;
a client that follows owners asks to be redirected instead (ROUTE_METADATA), learns the owner's address from
the `NOT_OWNER` error's details, and calls the owner directly from then on, saving a hop per call."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable, Sequence
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
"""How long an owner that could not be reached is not called again (a lease outlives its owner by 3 s by
default): its executions' calls go through the client's target meanwhile, forwarded there."""
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
        """Owners' addresses that could not be reached, and when: not called again for FAILED_SECONDS."""
        self._forwarded: dict[str, float] = {}
        """Executions whose calls go through the client's target, forwarded there, and since when: their owner
        could not be reached (dead, or not reachable from this client) for FAILED_SECONDS."""
        self._closing: set[asyncio.Future[None]] = set()

    def route(self, execution_id: str) -> tuple[Any, Sequence[tuple[str, str]] | None]:
        """The stub to call for the execution and the metadata to send: its owner's stub when known, asking to
        be redirected; through the client's target, forwarded, while its owner cannot be reached."""
        since = self._forwarded.get(execution_id)
        if since is not None:
            if time.monotonic() - since < FAILED_SECONDS:
                return self._default, None
            del self._forwarded[execution_id]
        address = self._owner.get(execution_id)
        if address is None:
            return self._default, ROUTE_METADATA
        self._owner.move_to_end(execution_id)
        if address not in self._stubs:
            self._stubs[address] = self._open_stub(address)
        return self._stubs[address][0], ROUTE_METADATA

    def learn(self, execution_id: str, error: SkillstateError, stub: Any) -> bool:
        """After a call on `stub` failed with `error`: True when it should be sent again at once, for nothing
        was done: to the owner it names, or, when that owner could not be reached lately (or names itself: a
        replica restarted holds the leases of its previous life for a while), through the client's target,
        which forwards it (and takes the execution over once that owner's lease expires). An owner that
        cannot be reached is forgotten."""
        now = time.monotonic()
        address = error.metadata.get("owner_address") if error.reason == "NOT_OWNER" else None
        if address:
            if address == self._address_of(stub) or now - self._failed.get(address, -math.inf) < FAILED_SECONDS:
                self._forwarded[execution_id] = now
                return True
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
                self._forwarded[execution_id] = now
            return "failed to connect" in str(error)  # never sent: nothing was done
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
