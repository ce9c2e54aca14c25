"""A PostgreSQL database as every store on it sees it: a connection pool in one schema, tables made on open,
and asyncpg's errors translated into the storage errors of server/errors.py at this boundary."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from ..errors import DuplicateRowError, NotFoundError, StorageError, StorageFullError
from .redact import redact

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def describe(dsn: str, schema: str | None = None) -> str:
    """The database, without its password, for messages."""
    return f"{redact(dsn)} (schema {schema})" if schema else redact(dsn)


SCHEMA_LOCK = 0x736B696C6C
"""The advisory lock every server holds while it makes its tables: replicas started together on an empty
database would otherwise race in PostgreSQL's catalog (CREATE ... IF NOT EXISTS is not safe concurrently)."""


ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
"""What asyncpg raises when the database or the connection fails."""

Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters."""
Check = tuple[Statement, Callable[[list[tuple[Any, ...]]], None]]
"""A query run first in a transaction, and a test of its rows that raises to roll the transaction back."""


class Database:
    """A pool on one PostgreSQL database (and schema) whose tables are made on open: what the revision log,
    the skill store and the credential store on PostgreSQL share.

    Errors come out as StorageError naming the database (without its password); a transaction's repeated
    key as DuplicateRowError, a row naming an unknown execution as NotFoundError, a full disk as
    StorageFullError.
    """

    def __init__(
        self,
        dsn: str,
        schema: str | None,
        ddl: str,
        what: str,
        pool_size: int = 2,
        settings: dict[str, str] | None = None,
    ) -> None:
        """`settings` are PostgreSQL settings for the pool's connections."""
        self.dsn, self.schema, self._ddl, self._what, self._pool_size = dsn, schema, ddl, what, pool_size
        self._settings = settings or {}
        self._pool: asyncpg.Pool | None = None

    @property
    def where(self) -> str:
        return describe(self.dsn, self.schema)

    async def open(self) -> None:
        if self._pool is not None:
            return
        if self.schema is not None and not _IDENTIFIER.match(self.schema):
            raise StorageError(f"schema {self.schema!r}: expected a lower-case SQL identifier")
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self._pool_size,
                server_settings={**self._settings, **({"search_path": self.schema} if self.schema else {})},
            )
            if self._ddl:  # (a pool on tables another store makes has none)
                async with self._pool.acquire() as connection, connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
                    if self.schema:
                        await connection.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
                    await connection.execute(self._ddl)
        except BaseException as e:
            await self.close()
            if isinstance(e, ERRORS):
                raise StorageError(f"cannot open {self.where}: {e}") from e
            raise

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

    async def fetch_together(self, *queries: Statement) -> list[list[tuple[Any, ...]]]:
        """The rows of each query, all read from one snapshot of the database (a repeatable-read, read-only
        transaction): what other servers commit meanwhile shows in none of them."""
        try:
            async with (
                self.pool.acquire() as connection,
                connection.transaction(isolation="repeatable_read", readonly=True),
            ):
                return [[tuple(row) for row in await connection.fetch(sql, *params)] for sql, params in queries]
        except ERRORS as e:
            raise StorageError(f"{self._what} at {self.where}: {e}") from e

    async def value_within(self, seconds: float, sql: str, *params: Any) -> Any:
        """`value`, or StorageError after `seconds` (a connection the network dropped without a word)."""
        try:
            return await self.pool.fetchval(sql, *params, timeout=seconds)
        except TimeoutError as e:
            raise StorageError(f"{self._what} at {self.where}: no answer in {seconds:g} s") from e
        except ERRORS as e:
            raise StorageError(f"{self._what} at {self.where}: {e}") from e

    async def value(self, sql: str, *params: Any) -> Any:
        try:
            return await self.pool.fetchval(sql, *params)
        except ERRORS as e:
            raise StorageError(f"{self._what} at {self.where}: {e}") from e

    async def transaction(self, *statements: Statement, check: Check | None = None) -> None:
        """Run the statements on one connection in one transaction: all of them are committed, or none. With
        `check`, its query runs first and its test is given the rows: the test raising rolls everything back."""
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                if check is not None:
                    (sql, parameters), test = check
                    test([tuple(row) for row in await connection.fetch(sql, *parameters)])
                for sql, parameters in statements:
                    await connection.execute(sql, *parameters)
        except asyncpg.UniqueViolationError as e:
            raise DuplicateRowError(f"a row with the same key is already stored: {e.detail or e}") from e
        except asyncpg.ForeignKeyViolationError as e:
            raise NotFoundError("a row refers to an unknown execution") from e
        except asyncpg.DiskFullError as e:
            raise StorageFullError(f"{self.where} is full: nothing of this commit was written ({e})") from e
        except ERRORS as e:
            raise StorageError(f"commit to {self.where} failed: {e}") from e
