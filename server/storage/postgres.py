"""A PostgreSQL database as every store on it sees it: a connection pool in one schema, tables made on open,
and asyncpg's errors translated into the storage errors of server/errors.py at this boundary."""

from __future__ import annotations

import re
from typing import Any

import asyncpg

from ..errors import StorageError

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def describe(dsn: str, schema: str | None = None) -> str:
    """The database, without its password, for messages."""
    where = re.sub(r"://([^:@/]+):[^@/]*@", r"://\1:***@", dsn)
    return f"{where} (schema {schema})" if schema else where


async def open_pool(dsn: str, schema: str | None, size: int) -> asyncpg.Pool:
    """A connection pool whose sessions use `schema` (created if missing) for unqualified table names."""
    if schema is not None and not _IDENTIFIER.match(schema):
        raise StorageError(f"schema {schema!r}: expected a lower-case SQL identifier")
    pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, server_settings={"search_path": schema} if schema else {}
    )
    if schema:
        try:
            await pool.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        except BaseException:
            await pool.close()
            raise
    return pool


ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
"""What asyncpg raises when the database or the connection fails."""


class Database:
    """A pool on one PostgreSQL database (and schema) whose tables are made on open: what the revision log,
    the skill store and the credential store on PostgreSQL share."""

    def __init__(self, dsn: str, schema: str | None, ddl: str, what: str, pool_size: int = 2) -> None:
        self.dsn, self.schema, self._ddl, self._what, self._pool_size = dsn, schema, ddl, what, pool_size
        self._pool: asyncpg.Pool | None = None

    @property
    def where(self) -> str:
        return describe(self.dsn, self.schema)

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            self._pool = await open_pool(self.dsn, self.schema, self._pool_size)
            await self._pool.execute(self._ddl)
        except ERRORS as e:
            await self.close()
            raise StorageError(f"cannot open {self.where}: {e}") from e

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StorageError(f"the {self._what} is not open")
        return self._pool

    async def fetch(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        try:
            return [tuple(row) for row in await self.pool.fetch(sql, *params)]
        except ERRORS as e:
            raise StorageError(f"{self._what} at {self.where}: {e}") from e

    async def value(self, sql: str, *params: Any) -> Any:
        try:
            return await self.pool.fetchval(sql, *params)
        except ERRORS as e:
            raise StorageError(f"{self._what} at {self.where}: {e}") from e
