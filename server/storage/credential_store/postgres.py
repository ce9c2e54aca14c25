"""The credential store on PostgreSQL, beside a PostgreSQL revision log: every replica reads the same
credentials, and `skillstate auth --db postgresql://...` issues and revokes them there."""

from __future__ import annotations

from ..postgres import Database
from ..records import Credential
from .base import COLUMNS, EVERY_CREDENTIAL, CredentialStore, read_credential

_DDL = """
CREATE TABLE IF NOT EXISTS credentials (
    token_id      TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    agent         TEXT NOT NULL,
    executions    TEXT[] NOT NULL,
    skills        TEXT[] NOT NULL,
    rights        TEXT[] NOT NULL,
    issued_at     DOUBLE PRECISION NOT NULL,
    expires_at    DOUBLE PRECISION,
    revoked_at    DOUBLE PRECISION
);
"""


class PostgresCredentialStore(CredentialStore):
    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        self._db = Database(dsn, schema, _DDL, "credential store")

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def all(self) -> list[Credential]:
        return [read_credential(row, tuple) for row in await self._db.fetch(EVERY_CREDENTIAL)]

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        rows = await self._db.fetch(f"SELECT {COLUMNS} FROM credentials WHERE token_id = $1", token_id)
        return (read_credential(rows[0], tuple), rows[0][1]) if rows else None

    async def any_issued(self) -> bool:
        return bool(await self._db.fetch("SELECT 1 FROM credentials LIMIT 1"))

    async def add(self, credential: Credential, secret_digest: str) -> None:
        c = credential
        await self._db.fetch(
            f"INSERT INTO credentials ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)",
            c.token_id, secret_digest, c.agent, list(c.executions), list(c.skills),
            sorted(r.value for r in c.rights), c.issued_at, c.expires_at,
        )  # fmt: skip

    async def mark_revoked(self, token_id: str, at: float) -> None:
        await self._db.fetch(
            "UPDATE credentials SET revoked_at = $1 WHERE token_id = $2 AND revoked_at IS NULL", at, token_id
        )
