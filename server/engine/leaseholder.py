"""This replica's leases on a shared log's executions (server/storage/revision_log/leases.py): the one owner
of an execution merges, commits and serves it, so its memory is the truth and a read needs no look at the
log; a call for an execution another replica owns is NotOwnerError, which the RPC layer forwards there.

The replica's heartbeat is renewed every quarter of `seconds`. It counts as alive until `seconds` (less a
tenth, for the clocks' drift) after the start of its last renewal: while alive, nobody can have taken its
leases. Past that, a use waits for a renewal; a renewal that finds the heartbeat had expired asks which
leases are still held, and hands the others to `on_lost` (their commits would be fenced anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from ..errors import NotOwnerError, StorageError
from ..storage.revision_log.leases import LeaseTable

log = logging.getLogger(__name__)

DRIFT = 0.9
"""The share of a heartbeat's life this replica counts on (clocks may run at slightly different rates)."""


class Leaseholder:
    """Takes and keeps this replica's leases; `epochs()` gives those it relies on (the loaded executions')."""

    def __init__(
        self,
        table: LeaseTable,
        seconds: float,
        epochs: Callable[[], Mapping[str, int]],
        on_lost: Callable[[dict[str, int]], None],
    ) -> None:
        self._table, self._seconds, self._epochs, self._on_lost = table, seconds, epochs, on_lost
        self._alive_until = 0.0
        self._address = ""
        self._beating: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self.expiries = 0
        """Renewals that found this replica's heartbeat expired: a lease taken before one may have been lost
        without that renewal knowing of it (`still_held`)."""

    @property
    def owner(self) -> str:
        return self._table.owner

    async def start(self, address: str = "") -> None:
        """Join with the address other replicas forward calls to (set again by `advertise`)."""
        await self.advertise(address)
        self._beating = asyncio.create_task(self._beat(), name="skillstate-heartbeat")

    async def advertise(self, address: str) -> None:
        started = time.monotonic()
        await self._table.join(address, self._seconds)
        self._address = address
        self._alive_until = started + self._seconds * DRIFT

    async def close(self) -> None:
        """Stop the heartbeat and leave: every lease is free for another replica at once."""
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
        self._alive_until = 0.0
        try:
            await self._table.leave()
        except StorageError as e:  # they expire instead
            log.warning("could not hand this replica's leases over: %s", e)

    @property
    def alive(self) -> bool:
        return time.monotonic() < self._alive_until

    async def confirm(self) -> None:
        """Return once this replica is alive again (a renewal now if it is late); StorageError if the shared
        log cannot be reached to renew."""
        if self.alive:
            return
        await self._renew_once()
        if not self.alive:
            raise StorageError("this replica cannot renew its leases on the shared log")

    async def take(self, execution_id: str, *, new: bool = False) -> int | None:
        """The epoch of this replica's lease on the execution, taken if need be; None if there is no such
        execution (unless `new`). NotOwnerError naming the owner if another live replica holds it."""
        await self.confirm()
        lease = await self._table.acquire(execution_id, new=new)
        if lease is None:
            return None
        if lease.owner != self._table.owner:
            raise NotOwnerError(execution_id, lease.address, lease.expires_in)
        return lease.epoch

    async def still_held(self, execution_id: str, epoch: int, expiries: int) -> bool:
        """Whether a lease taken at `epoch` when `expiries` was the count is still this replica's: for an
        execution loaded or created meanwhile, which the renewals that counted an expiry did not check."""
        return expiries == self.expiries or execution_id in await self._table.held({execution_id: epoch})

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._seconds / 4)
            try:
                await self._renew_once()
            except StorageError as e:
                log.warning("renewing this replica's leases failed: %s", e)

    async def _renew_once(self) -> None:
        """One renewal, shared by whoever asks while it runs."""
        if self._renewal is None or self._renewal.done():
            self._renewal = asyncio.create_task(self._renew(), name="skillstate-lease-renewal")
        await asyncio.shield(self._renewal)

    async def _renew(self) -> None:
        started = time.monotonic()
        if not await self._table.heartbeat(self._seconds):  # expired or gone: some leases may have been taken
            await self._table.join(self._address, self._seconds)  # alive again first: no more can be taken
            self.expiries += 1
            relied_on = dict(self._epochs())
            lost = set(relied_on) - await self._table.held(relied_on)
            if lost:
                log.warning("this replica's heartbeat had expired: %d executions were taken over", len(lost))
                self._on_lost({execution_id: relied_on[execution_id] for execution_id in lost})
        self._alive_until = started + self._seconds * DRIFT
