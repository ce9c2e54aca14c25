"""Leases on PostgreSQL (leases.py): a heartbeat row per replica and a lease row per execution, both timed by
the database's clock. The commit fence is `FENCE`, run first in each group commit's transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import FencedError, StorageError
from ..postgres import ERRORS, Check, Database
from .leases import Lease, LeaseTable

DDL = """
CREATE TABLE IF NOT EXISTS replicas (
    owner      TEXT PRIMARY KEY,
    address    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    execution_id TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    epoch        BIGINT NOT NULL
);
ALTER TABLE revisions ADD COLUMN IF NOT EXISTS lease_epoch BIGINT NOT NULL DEFAULT 0;
"""
"""Lease rows outlive their executions (a deleted id created again goes on from its last epoch, so a replica
deposed before the delete cannot commit into the new one); heartbeats of replicas gone a day are dropped."""

_HOLDER = """
SELECT address, EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 FROM replicas WHERE owner = $1
FOR SHARE
"""
"""The holder's heartbeat, read afresh after the lease row is locked (a statement of its own: a snapshot taken
after the wait), and locked until the take commits: a holder renewing meanwhile waits, then sees the take."""
_EXISTS = "SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = $1)"
_HELD = """
SELECT l.execution_id FROM leases l JOIN unnest($2::text[], $3::bigint[]) AS w(execution_id, epoch)
ON l.execution_id = w.execution_id AND l.epoch = w.epoch WHERE l.owner = $1
"""
_RACED = Lease("", "", "", 0, 0.0)
"""A take that found no lease row, then another replica's: looked at again."""
FENCE = _HELD + " ORDER BY l.execution_id FOR SHARE OF l"
"""The leases a commit writes under, locked for its transaction in one order (a take of one waits for it)."""


def fence_check(owner: str, epochs: Mapping[str, int]) -> Check:
    """The check a transaction writing under these leases runs first: FencedError unless this replica holds
    each at its epoch."""
    ids = sorted(epochs)

    def test(rows: list[tuple[str, ...]]) -> None:
        if len(rows) < len(ids):
            held = {row[0] for row in rows}
            raise FencedError({i: epochs[i] for i in ids if i not in held})

    return (FENCE, (owner, ids, [epochs[i] for i in ids])), test


class PostgresLeases(LeaseTable):
    def __init__(self, db: Database, owner: str, lock_wait: float) -> None:
        """`lock_wait`: the least seconds a take waits for a lease row (longer than a stalled transaction of
        the holder lives)."""
        self._db, self.owner, self._lock_wait = db, owner, lock_wait
        self._seconds = 3.0
        self._beats = Database(db.dsn, db.schema, "", "replica heartbeat", pool_size=1)
        """A connection of its own for the heartbeat: takes waiting on row locks never hold it up."""

    async def join(self, address: str, seconds: float) -> None:
        self._seconds = seconds
        await self._beats.open()
        await self._beats.transaction(
            ("DELETE FROM replicas WHERE expires_at < clock_timestamp() - interval '1 day'", ()),
            (
                "INSERT INTO replicas VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3)) "
                "ON CONFLICT (owner) DO UPDATE SET address = EXCLUDED.address, expires_at = EXCLUDED.expires_at",
                (self.owner, address, seconds),
            ),
        )

    async def heartbeat(self, seconds: float) -> bool:
        alive = await self._beats.value_within(
            seconds / 2,
            "WITH old AS (SELECT expires_at FROM replicas WHERE owner = $1 FOR UPDATE) "
            "UPDATE replicas SET expires_at = clock_timestamp() + make_interval(secs => $2) FROM old "
            "WHERE replicas.owner = $1 RETURNING old.expires_at > clock_timestamp()",
            self.owner, seconds,
        )  # fmt: skip
        return bool(alive)

    async def held(self, epochs: Mapping[str, int]) -> set[str]:
        ids = list(epochs)
        rows = await self._db.fetch(_HELD, self.owner, ids, [epochs[i] for i in ids])
        return {row[0] for row in rows}

    async def acquire(self, execution_id: str, *, new: bool = False) -> Lease | None:
        for _ in range(3):
            try:
                async with self._db.pool.acquire() as connection, connection.transaction():
                    # waiting longer means the holder's commit is stalled: its transaction is ended by the
                    # revision log's idle_in_transaction_session_timeout, and the caller tries again
                    wait = max(self._seconds, self._lock_wait)
                    await connection.execute(f"SET LOCAL lock_timeout = {round(wait * 1000)}")
                    lease = await self._acquire(connection, execution_id, new)
            except ERRORS as e:
                raise StorageError(f"taking the lease of execution {execution_id!r} failed: {e}") from e
            if lease is not _RACED:
                return lease
        raise StorageError(f"the lease of execution {execution_id!r} was contended three times in a row: try again")

    async def _acquire(self, connection: Any, execution_id: str, new: bool) -> Lease | None:
        held = await connection.fetchrow(
            "SELECT owner, epoch FROM leases WHERE execution_id = $1 FOR UPDATE", execution_id
        )  # waits for the commits in flight under the lease
        if held is not None and held["owner"] == self.owner:
            return Lease(execution_id, self.owner, "", int(held["epoch"]), float("inf"))
        if held is not None:
            holder = await connection.fetchrow(_HOLDER, held["owner"])
            if holder is not None and holder[1] > 0:
                return Lease(execution_id, held["owner"], holder[0], int(held["epoch"]), float(holder[1]))
        if not new and not await connection.fetchval(_EXISTS, execution_id):
            return None
        if held is not None:  # its holder is gone: taken, under the row lock this transaction holds
            epoch = await connection.fetchval(
                "UPDATE leases SET owner = $2, epoch = epoch + 1 WHERE execution_id = $1 RETURNING epoch",
                execution_id, self.owner,
            )  # fmt: skip
        else:  # nobody has held it: made, unless another replica made it meanwhile (then look again)
            epoch = await connection.fetchval(
                "INSERT INTO leases VALUES ($1, $2, 1) ON CONFLICT DO NOTHING RETURNING epoch", execution_id, self.owner
            )
            if epoch is None:
                return _RACED
        return Lease(execution_id, self.owner, "", int(epoch), float("inf"))

    async def leave(self) -> None:
        if self._beats.is_open:
            await self._beats.transaction(("DELETE FROM replicas WHERE owner = $1", (self.owner,)))

    async def close(self) -> None:
        """Close the heartbeat's connection (the log closes it)."""
        await self._beats.close()
