"""The credential store on PostgreSQL, beside a PostgreSQL revision log: every replica reads the same
credentials, and `skillstate auth --db postgresql://...` issues and revokes them there."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import asyncpg

from .credentials import DEFAULT_RIGHTS, Credential, Issued, Right, new_credential
from .errors import NotFoundError, StorageError
from .storage.postgres import describe, open_pool

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
_COLUMNS = "token_id, secret_sha256, agent, executions, skills, rights, issued_at, expires_at, revoked_at"
_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


class PostgresCredentialStore:
    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        self._dsn, self._schema = dsn, schema
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            self._pool = await open_pool(self._dsn, self._schema, 2)
            await self._pool.execute(_DDL)
        except _ERRORS as e:
            await self.close()
            raise StorageError(f"cannot open {describe(self._dsn, self._schema)}: {e}") from e

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def issue(
        self,
        agent: str,
        executions: Iterable[str],
        skills: Iterable[str] = (),
        rights: Iterable[Right] = DEFAULT_RIGHTS,
        expires_in: float | None = None,
    ) -> Issued:
        credential, token, secret_digest = new_credential(agent, executions, skills, rights, expires_in)
        c = credential
        await self._fetch(
            f"INSERT INTO credentials ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)",
            c.token_id, secret_digest, c.agent, list(c.executions), list(c.skills),
            sorted(r.value for r in c.rights), c.issued_at, c.expires_at,
        )  # fmt: skip
        return Issued(credential, token)

    async def revoke(self, token_id: str) -> Credential:
        await self._fetch(
            "UPDATE credentials SET revoked_at = $1 WHERE token_id = $2 AND revoked_at IS NULL", time.time(), token_id
        )
        found = await self.lookup(token_id)
        if found is None:
            raise NotFoundError(f"token id {token_id!r}: no such credential")
        return found[0]

    async def all(self) -> list[Credential]:
        return [_credential(row) for row in await self._fetch(f"SELECT {_COLUMNS} FROM credentials ORDER BY 7, 1")]

    async def lookup(self, token_id: str) -> tuple[Credential, str] | None:
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM credentials WHERE token_id = $1", token_id)
        return (_credential(rows[0]), rows[0][1]) if rows else None

    async def any_issued(self) -> bool:
        return bool(await self._fetch("SELECT 1 FROM credentials LIMIT 1"))

    async def _fetch(self, sql: str, *params: Any) -> list[Any]:
        if self._pool is None:
            raise StorageError("the credential store is not open")
        try:
            return [tuple(row) for row in await self._pool.fetch(sql, *params)]
        except _ERRORS as e:
            raise StorageError(f"credentials at {describe(self._dsn, self._schema)}: {e}") from e


def _credential(row: Any) -> Credential:
    token_id, _, agent, executions, skills, rights, issued_at, expires_at, revoked_at = row
    return Credential(
        token_id, agent, tuple(executions), tuple(skills), frozenset(Right(r) for r in rights),
        issued_at, expires_at, revoked_at,
    )  # fmt: skip
