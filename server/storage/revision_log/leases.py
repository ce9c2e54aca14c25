"""Leases: which replica of a shared log owns each execution, so that one server at a time merges and commits
it (as a Kafka partition has one leader, and etcd ties leases to a client's keep-alive).

Each replica keeps a heartbeat row alive in the shared database (its id, the address it takes calls at, an
expiry by the database's clock: replicas' clocks never compare). An execution's lease names its owner and
an epoch. A replica takes a lease nobody holds, or whose owner's heartbeat expired or left, and each such
take raises the epoch by one. Every commit names the epochs its writer holds (`Batch.fence`) and the
database refuses it unless they are still the leases' (FencedError): an owner that paused past its
heartbeat while another replica took its executions over can never commit to them again. A take waits for
the commits in flight under the old epoch (they hold the lease row), so what the new owner then loads is
everything the old one committed.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lease:
    """An execution's lease as the database has it."""

    execution_id: str
    owner: str
    """The id of the replica holding it."""
    address: str
    """Where that replica takes calls (host:port)."""
    epoch: int
    expires_in: float
    """Seconds until its owner's heartbeat expires, by the database's clock."""


class LeaseTable(abc.ABC):
    """One replica's hold on the leases of a shared log."""

    owner: str
    """This replica's id: the owner of the leases it takes."""

    @abc.abstractmethod
    async def join(self, address: str, seconds: float) -> None:
        """Start this replica's heartbeat, alive for `seconds`, calling it at `address`."""

    @abc.abstractmethod
    async def heartbeat(self, seconds: float) -> bool:
        """Keep this replica alive `seconds` more; False if its heartbeat had expired (or left) before: any of
        its leases may have been taken over meanwhile, so the caller checks those it relies on (`held`)."""

    @abc.abstractmethod
    async def held(self, epochs: Mapping[str, int]) -> set[str]:
        """Of these executions (id -> the epoch this replica took), those whose lease it still holds."""

    @abc.abstractmethod
    async def acquire(self, execution_id: str, *, new: bool = False) -> Lease | None:
        """Take the execution's lease if this replica may (nobody live holds it), keeping the epoch if this
        replica holds it already; returns the lease as it stands after the attempt: this replica's when it
        has it, its live holder's otherwise. None when there is no such execution, unless `new` (one about
        to be created)."""

    @abc.abstractmethod
    async def leave(self) -> None:
        """End this replica's heartbeat: every lease it holds may be taken at once (a shutdown's handover)."""
