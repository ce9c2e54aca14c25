"""The server's SQLite file as every store on it sees it: one connection, one set of settings, and SQLite's
errors translated into the storage errors of server/errors.py at this boundary."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from ..errors import DuplicateRowError, NotFoundError, StateError, StorageError, StorageFullError

BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another connection to the same file to release the write lock."""
SETTINGS = (
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS};"
)

Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters."""


def insert(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Statement | None:
    """One INSERT of every row (a single statement is atomic on its own), or None when there are none.

    Callers keep rows x columns under SQLite's limit on bound parameters (250,000 in the SQLite Python ships).
    """
    if not rows:
        return None
    placeholders = "(" + ",".join("?" * len(columns)) + ")"
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES {','.join([placeholders] * len(rows))}"
    return sql, [value for row in rows for value in row]


def write_error(error: sqlite3.Error, what: str, path: str, max_bytes: int | None) -> StateError:
    """The storage error a failed write comes out as: a repeated key as DuplicateRowError, a row naming an
    unknown execution as NotFoundError, a full disk (or the `max_bytes` cap) as StorageFullError."""
    if isinstance(error, sqlite3.IntegrityError):
        if "FOREIGN KEY" in str(error):
            return NotFoundError("a row refers to an unknown execution")
        return DuplicateRowError(f"a row with the same key is already stored: {error}")
    if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        cap = f" (its cap is {max_bytes:,} bytes)" if max_bytes else ""
        return StorageFullError(f"{path} is full{cap}: nothing of this commit was written")
    return StorageError(f"{what}: write to {path} failed: {error}")


class Database:
    """One connection to a SQLite file through aiosqlite, in autocommit mode (a transaction says BEGIN), its
    tables made on open: the skill and credential stores, and the revision log's reads (its writes go
    through sqlite_writer.Writer).

    Errors come out as StorageError naming the file: a repeated key as DuplicateRowError, a row naming an
    unknown execution as NotFoundError, a full disk as StorageFullError.
    """

    def __init__(self, path: str | Path, ddl: str = "", what: str = "database") -> None:
        self.path, self._ddl, self._what = str(path), ddl, what
        self._connection: aiosqlite.Connection | None = None
        self._writing = asyncio.Lock()
        """One transaction at a time on the connection: two calls may write at once."""

    async def open(self) -> None:
        """Connect, apply the settings and make the tables; idempotent, and nothing is left open on failure."""
        if self._connection is not None:
            return
        try:
            connection = await aiosqlite.connect(self.path, isolation_level=None)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open {self.path}: {e}") from e
        try:
            await connection.executescript(SETTINGS + self._ddl)
        except BaseException as e:
            await connection.close()  # an open connection keeps a worker thread alive
            if isinstance(e, sqlite3.Error):
                raise StorageError(f"cannot open {self.path}: {e}") from e
            raise
        self._connection = connection

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    @property
    def _open_connection(self) -> aiosqlite.Connection:
        if self._connection is None:
            raise StorageError(f"the {self._what} is not open")
        return self._connection

    async def rows(self, sql: str, *params: Any) -> list[Any]:
        try:
            return list(await self._open_connection.execute_fetchall(sql, params))
        except sqlite3.Error as e:
            raise StorageError(f"{self._what}: read from {self.path} failed: {e}") from e

    async def value(self, sql: str, *params: Any) -> Any:
        """The first column of the first row, or None when there is no row."""
        rows = await self.rows(sql, *params)
        return rows[0][0] if rows else None

    async def script(self, sql: str) -> None:
        """Run statements separated by semicolons (tables, pragmas) outside any transaction."""
        try:
            await self._open_connection.executescript(sql)
        except sqlite3.Error as e:
            raise StorageError(f"{self._what}: {self.path}: {e}") from e

    async def execute(self, sql: str, *params: Any) -> None:
        await self.transaction((sql, params))

    async def transaction(self, *statements: Statement | None) -> None:
        """Run the statements (None ones skipped) atomically: alone in autocommit when there is one, else
        between BEGIN IMMEDIATE and COMMIT, a thread hop each."""
        present = [s for s in statements if s is not None]
        connection = self._open_connection
        async with self._writing:
            try:
                if len(present) == 1:
                    await connection.execute(*present[0])
                    return
                await connection.execute("BEGIN IMMEDIATE")
                try:
                    for statement in present:
                        await connection.execute(*statement)
                    await connection.execute("COMMIT")
                except BaseException:
                    if connection.in_transaction:  # SQLite ends it by itself after some errors
                        await connection.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise write_error(e, self._what, self.path, None) from e
