"""The default RevisionLog: one SQLite file in WAL mode, through aiosqlite.

Writes go through one connection in autocommit mode. A group commit that writes one table (the common
case: a batch of revisions) is a single multi-row INSERT, which SQLite runs as its own transaction: one
thread hop and one fsync for the whole batch. A batch that writes several tables runs in an explicit
transaction, a hop per statement. Each hop waits for the event loop, so under load the number of hops, not
the disk, bounds the commit rate. Reads use a second connection, so they see only committed transactions
and never wait behind a commit's fsync.
"""

from __future__ import annotations

import asyncio
import fcntl
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import aiosqlite

from ...errors import (
    AlreadyExistsError,
    DuplicateRowError,
    NotFoundError,
    OutOfRangeError,
    StorageError,
    StorageFullError,
)
from ..records import Batch, ExecutionRecord, ObservationRecord, RevisionRecord, SnapshotRecord
from .base import RevisionLog

SCHEMA_VERSION = 1

_DDL = """
CREATE TABLE IF NOT EXISTS executions (
    execution_id     TEXT PRIMARY KEY,
    schema_json      TEXT NOT NULL,
    created_at       REAL NOT NULL,
    compact_revision INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS revisions (
    execution_id       TEXT NOT NULL REFERENCES executions(execution_id),
    revision           INTEGER NOT NULL,
    agent_id           TEXT NOT NULL,
    base_revision      INTEGER NOT NULL,
    patch_json         TEXT NOT NULL,
    applied_patch_json TEXT NOT NULL,
    action_json        TEXT NOT NULL,
    client_patch_id    TEXT NOT NULL,
    resolutions_json   TEXT NOT NULL,
    state_hash         TEXT NOT NULL,
    committed_at       REAL NOT NULL,
    PRIMARY KEY (execution_id, revision)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS revisions_by_patch_id
    ON revisions (execution_id, agent_id, client_patch_id) WHERE client_patch_id != '';
CREATE TABLE IF NOT EXISTS snapshots (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    revision     INTEGER NOT NULL,
    state_json   TEXT NOT NULL,
    state_hash   TEXT NOT NULL,
    PRIMARY KEY (execution_id, revision)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS observations (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    sequence     INTEGER NOT NULL,
    to_address   TEXT NOT NULL,
    source       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    published_at REAL NOT NULL,
    PRIMARY KEY (execution_id, sequence)
) WITHOUT ROWID;
"""

_REVISION_COLUMNS = (
    "execution_id, revision, agent_id, base_revision, patch_json, applied_patch_json, action_json, "
    "client_patch_id, resolutions_json, state_hash, committed_at"
)
_OBSERVATION_COLUMNS = "execution_id, sequence, to_address, source, kind, payload_json, published_at"
_SNAPSHOT_COLUMNS = "execution_id, revision, state_json, state_hash"

Statement = tuple[str, Sequence[Any]]
"""SQL and its parameters."""


def _insert(table: str, columns: str, rows: list[tuple[Any, ...]]) -> Statement | None:
    """One INSERT of every row (a single statement is atomic on its own), or None when there are none.

    A batch holds at most EngineConfig.max_batch rows, far below SQLite's limit on bound parameters.
    """
    if not rows:
        return None
    placeholders = "(" + ",".join("?" * len(rows[0])) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES {','.join([placeholders] * len(rows))}", [
        value for row in rows for value in row
    ]


class SqliteRevisionLog(RevisionLog):
    """A RevisionLog in one SQLite database file (created if missing)."""

    def __init__(self, path: str | Path, max_bytes: int | None = None) -> None:
        """`max_bytes` caps the database file: a commit that would grow it further fails with
        StorageFullError, as a full disk would."""
        self._path, self._max_bytes = str(path), max_bytes
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._lock_file: IO[bytes] | None = None
        """One transaction at a time on the writer: a commit and a compaction may be called concurrently."""

    async def open(self) -> None:
        if self._writer is not None:
            return
        self._lock_file = _lock_exclusively(Path(self._path + ".lock"))
        try:
            self._writer = await connect(self._path)
            version = await self._scalar(self._writer, "PRAGMA user_version")
            if version not in (0, SCHEMA_VERSION):
                raise StorageError(f"{self._path}: schema version {version} is not {SCHEMA_VERSION}")
            await self._writer.executescript(_DDL + f"PRAGMA user_version = {SCHEMA_VERSION};")
            if self._max_bytes is not None:
                page_size = await self._scalar(self._writer, "PRAGMA page_size")
                await self._writer.execute(f"PRAGMA max_page_count = {max(1, self._max_bytes // page_size)}")
            self._reader = await connect(self._path)
        except (sqlite3.Error, StorageError) as e:
            await self.close()  # an open connection keeps a worker thread alive
            if isinstance(e, StorageError):
                raise
            raise StorageError(f"cannot open {self._path}: {e}") from e

    async def close(self) -> None:
        for connection in (self._reader, self._writer):
            if connection is not None:
                await connection.close()
        self._reader = self._writer = None
        if self._lock_file is not None:
            self._lock_file.close()  # releases the lock
            self._lock_file = None

    @property
    def _w(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise StorageError("the revision log is not open")
        return self._writer

    @property
    def _r(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise StorageError("the revision log is not open")
        return self._reader

    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        rows = [(execution.execution_id, execution.schema_json, execution.created_at)]
        try:
            await self._transaction(
                _insert("executions", "execution_id, schema_json, created_at", rows),
                _insert("snapshots", _SNAPSHOT_COLUMNS, [_snapshot_row(genesis)]),
            )
        except DuplicateRowError as e:
            raise AlreadyExistsError(f"execution {execution.execution_id!r} already exists") from e

    async def list_executions(self) -> list[ExecutionRecord]:
        rows = await self._rows("SELECT execution_id, schema_json, created_at FROM executions ORDER BY execution_id")
        return [ExecutionRecord(*row) for row in rows]

    async def find_execution(self, execution_id: str) -> ExecutionRecord | None:
        rows = await self._rows(
            "SELECT execution_id, schema_json, created_at FROM executions WHERE execution_id = ?", execution_id
        )
        return ExecutionRecord(*rows[0]) if rows else None

    async def commit(self, batch: Batch) -> None:
        await self._transaction(
            _insert("revisions", _REVISION_COLUMNS, [_revision_row(r) for r in batch.revisions]),
            _insert("snapshots", _SNAPSHOT_COLUMNS, [_snapshot_row(s) for s in batch.snapshots]),
            _insert("observations", _OBSERVATION_COLUMNS, [_observation_row(o) for o in batch.observations]),
        )

    async def _transaction(self, *statements: Statement | None) -> None:
        """Run the statements atomically: alone in autocommit when there is one, else between BEGIN and COMMIT."""
        present = [s for s in statements if s is not None]
        async with self._write_lock:
            try:
                if len(present) == 1:
                    await self._w.execute(*present[0])
                else:
                    await self._w.execute("BEGIN IMMEDIATE")
                    try:
                        for statement in present:
                            await self._w.execute(*statement)
                        await self._w.execute("COMMIT")
                    except BaseException:
                        if self._w.in_transaction:  # SQLite ends it by itself after some errors
                            await self._w.execute("ROLLBACK")
                        raise
            except sqlite3.IntegrityError as e:
                if "FOREIGN KEY" in str(e):
                    raise NotFoundError("a row refers to an unknown execution") from e
                raise DuplicateRowError(f"a row with the same key is already stored: {e}") from e
            except sqlite3.Error as e:
                if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    cap = f" (its cap is {self._max_bytes:,} bytes)" if self._max_bytes else ""
                    raise StorageFullError(f"{self._path} is full{cap}: nothing of this commit was written") from e
                raise StorageError(f"commit to {self._path} failed: {e}") from e

    async def head_revision(self, execution_id: str) -> int:
        await self._require(execution_id)
        head = await self._scalar(self._r, "SELECT MAX(revision) FROM revisions WHERE execution_id = ?", execution_id)
        return head if head is not None else await self.compact_revision(execution_id)

    async def read_revisions(
        self, execution_id: str, after: int, up_to: int | None = None, limit: int | None = None
    ) -> list[RevisionRecord]:
        await self._require(execution_id)
        rows = await self._rows(
            f"SELECT {_REVISION_COLUMNS} FROM revisions WHERE execution_id = ? AND revision > ? AND revision <= ? "
            "ORDER BY revision LIMIT ?",
            execution_id, after, _MAX_INT if up_to is None else up_to, -1 if limit is None else limit,
        )  # fmt: skip
        return [RevisionRecord(*row) for row in rows]

    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        await self._require(execution_id)
        rows = await self._rows(
            "SELECT execution_id, revision, state_json, state_hash FROM snapshots WHERE execution_id = ? "
            "AND revision <= ? ORDER BY revision DESC LIMIT 1",
            execution_id, _MAX_INT if at_most is None else at_most,
        )  # fmt: skip
        return SnapshotRecord(*rows[0]) if rows else None

    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str) -> RevisionRecord | None:
        await self._require(execution_id)
        rows = await self._rows(
            f"SELECT {_REVISION_COLUMNS} FROM revisions "
            "WHERE execution_id = ? AND agent_id = ? AND client_patch_id = ?",
            execution_id, agent_id, client_patch_id,
        )  # fmt: skip
        return RevisionRecord(*rows[0]) if rows else None

    async def read_observations(
        self, execution_id: str, after: int, limit: int | None = None
    ) -> list[ObservationRecord]:
        await self._require(execution_id)
        rows = await self._rows(
            f"SELECT {_OBSERVATION_COLUMNS} FROM observations WHERE execution_id = ? AND sequence > ? "
            "ORDER BY sequence LIMIT ?",
            execution_id, after, -1 if limit is None else limit,
        )  # fmt: skip
        return [ObservationRecord(*row) for row in rows]

    async def last_observation_sequence(self, execution_id: str) -> int:
        await self._require(execution_id)
        last = await self._scalar(
            self._r, "SELECT MAX(sequence) FROM observations WHERE execution_id = ?", execution_id
        )
        return last or 0

    async def compact(self, execution_id: str, up_to: int) -> None:
        await self._require(execution_id)
        found = await self._scalar(
            self._w, "SELECT COUNT(*) FROM snapshots WHERE execution_id = ? AND revision = ?", execution_id, up_to
        )
        if not found:
            raise OutOfRangeError(f"no snapshot at revision {up_to} to compact to")
        await self._transaction(
            ("DELETE FROM revisions WHERE execution_id = ? AND revision <= ?", (execution_id, up_to)),
            ("DELETE FROM snapshots WHERE execution_id = ? AND revision < ?", (execution_id, up_to)),
            (
                "UPDATE executions SET compact_revision = MAX(compact_revision, ?) WHERE execution_id = ?",
                (up_to, execution_id),
            ),
        )

    async def compact_revision(self, execution_id: str) -> int:
        value = await self._scalar(
            self._r, "SELECT compact_revision FROM executions WHERE execution_id = ?", execution_id
        )
        if value is None:
            raise NotFoundError(f"execution {execution_id!r} not found")
        return int(value)

    async def _require(self, execution_id: str) -> None:
        await self.compact_revision(execution_id)

    async def _rows(self, sql: str, *params: Any) -> list[Any]:
        try:
            async with self._r.execute(sql, params) as cursor:
                return list(await cursor.fetchall())
        except sqlite3.Error as e:
            raise StorageError(f"read from {self._path} failed: {e}") from e

    async def _scalar(self, connection: aiosqlite.Connection, sql: str, *params: Any) -> Any:
        try:
            async with connection.execute(sql, params) as cursor:
                row = await cursor.fetchone()
        except sqlite3.Error as e:
            raise StorageError(f"read from {self._path} failed: {e}") from e
        return row[0] if row else None


_MAX_INT = (1 << 63) - 1
_SETTINGS = (
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;"
)


async def connect(path: str, script: str = "") -> aiosqlite.Connection:
    """A connection to the server's database in autocommit mode (callers say BEGIN), with the settings every
    store on it uses, after running `script` (a store's tables); closed again if that fails."""
    connection = await aiosqlite.connect(path, isolation_level=None)
    try:
        await connection.executescript(_SETTINGS + script)
    except BaseException:
        await connection.close()
        raise
    return connection


def _lock_exclusively(path: Path) -> IO[bytes]:
    """Hold an exclusive lock beside the database for as long as it is open: one server per log."""
    try:
        lock_file = open(path, "a+b")  # noqa: SIM115 - held until close()
    except OSError as e:
        raise StorageError(f"cannot open {path}: {e.strerror}") from e
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lock_file.close()
        raise StorageError(f"{path.with_suffix('')} is in use by another skillstate server") from e
    return lock_file


def _revision_row(r: RevisionRecord) -> tuple[Any, ...]:
    return (
        r.execution_id, r.revision, r.agent_id, r.base_revision, r.patch_json, r.applied_patch_json,
        r.action_json, r.client_patch_id, r.resolutions_json, r.state_hash, r.committed_at,
    )  # fmt: skip


def _snapshot_row(s: SnapshotRecord) -> tuple[Any, ...]:
    return (s.execution_id, s.revision, s.state_json, s.state_hash)


def _observation_row(o: ObservationRecord) -> tuple[Any, ...]:
    return (o.execution_id, o.sequence, o.to, o.source, o.kind, o.payload_json, o.published_at)
