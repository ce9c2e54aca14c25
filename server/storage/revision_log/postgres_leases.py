"""Leases on PostgreSQL (leases.py): a heartbeat row per replica and a lease row per execution, both timed by
the database's clock. The commit fence is `FENCE`, run first in each group commit's transaction."""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import FencedError, StorageError
from ..postgres import Check, Database
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

_LIVE = "EXISTS (SELECT 1 FROM replicas r WHERE r.owner = {0} AND r.expires_at > clock_timestamp())"

_ACQUIRE = f"""
INSERT INTO leases AS l (execution_id, owner, epoch)
SELECT $1::text, $2::text, 1 WHERE $3::boolean OR EXISTS (SELECT 1 FROM executions WHERE execution_id = $1)
ON CONFLICT (execution_id) DO UPDATE SET
    epoch = CASE WHEN l.owner = EXCLUDED.owner THEN l.epoch ELSE l.epoch + 1 END, owner = EXCLUDED.owner
WHERE l.owner = EXCLUDED.owner OR NOT {_LIVE.format("l.owner")}
RETURNING epoch
"""
_HOLDER = """
SELECT l.owner, r.address, l.epoch, EXTRACT(EPOCH FROM r.expires_at - clock_timestamp())::float8
FROM leases l JOIN replicas r ON r.owner = l.owner WHERE l.execution_id = $1
"""
_EXISTS = "SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = $1)"
_HELD = """
SELECT l.execution_id FROM leases l JOIN unnest($2::text[], $3::bigint[]) AS w(execution_id, epoch)
ON l.execution_id = w.execution_id AND l.epoch = w.epoch WHERE l.owner = $1
"""
FENCE = _HELD + " ORDER BY l.execution_id FOR SHARE OF l"
"""The leases a commit writes under, locked for its transaction in one order (a take of one waits for it)."""


def fence_check(owner: str, epochs: Mapping[str, int]) -> Check:
    """The check a transaction writing under these leases runs first: FencedError unless this replica holds
    each at its epoch."""
    ids = sorted(epochs)

    def test(rows: list[tuple[str, ...]]) -> None:
        if len(rows) < len(ids):
            raise FencedError(sorted(set(ids) - {row[0] for row in rows}))

    return (FENCE, (owner, ids, [epochs[i] for i in ids])), test


class PostgresLeases(LeaseTable):
    def __init__(self, db: Database, owner: str) -> None:
        self._db, self.owner = db, owner

    async def join(self, address: str, seconds: float) -> None:
        await self._db.transaction(
            ("DELETE FROM replicas WHERE expires_at < clock_timestamp() - interval '1 day'", ()),
            (
                "INSERT INTO replicas VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3)) "
                "ON CONFLICT (owner) DO UPDATE SET address = EXCLUDED.address, expires_at = EXCLUDED.expires_at",
                (self.owner, address, seconds),
            ),
        )

    async def heartbeat(self, seconds: float) -> bool:
        alive = await self._db.value(
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
        for _ in range(3):  # the holder may expire, or a lease row appear, between the two reads
            epoch = await self._db.value(_ACQUIRE, execution_id, self.owner, new)
            if epoch is not None:
                return Lease(execution_id, self.owner, "", int(epoch), float("inf"))
            rows = await self._db.fetch(_HOLDER, execution_id)
            if rows and rows[0][0] != self.owner and rows[0][3] > 0:
                owner, address, held, expires_in = rows[0]
                return Lease(execution_id, owner, address, int(held), float(expires_in))
            if not new and not await self._db.value(_EXISTS, execution_id):
                return None
        raise StorageError(f"the lease of execution {execution_id!r} changed hands three times in a row: try again")

    async def leave(self) -> None:
        await self._db.transaction(("DELETE FROM replicas WHERE owner = $1", (self.owner,)))
