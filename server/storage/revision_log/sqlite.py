"""The default RevisionLog: one SQLite file in WAL mode.

Writes go through one connection in autocommit mode (server/storage/sqlite_writer.py). A group commit that
writes one table (the common case: a batch of revisions) is a single multi-row INSERT, which SQLite runs as
its own transaction, with one fsync for the whole batch; a batch that writes several tables runs between
BEGIN and COMMIT. A small group commit runs on the event loop, anything else in the writer's thread, in one
hop. Reads use a second connection through aiosqlite, so they see only committed transactions and never
wait behind a commit's fsync.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from ...errors import (
    AlreadyExistsError,
    DuplicateRowError,
    NotFoundError,
    OutOfRangeError,
    StorageError,
)
from ..records import (
    EXECUTION_COLUMNS,
    MAX_LISTED_AGENTS,
    OBSERVATION_COLUMNS,
    REVISION_COLUMNS,
    SNAPSHOT_COLUMNS,
    Batch,
    ExecutionRecord,
    ExecutionSummary,
    ObservationRecord,
    RevisionRecord,
    SnapshotRecord,
    StoredExecution,
    execution_row,
    observation_row,
    revision_row,
    snapshot_row,
)
from ..sqlite import Database, insert
from ..sqlite_writer import INLINE_BUDGET, Writer
from .base import FILL_AGENTS, HOLDING_EXECUTIONS, ID_CEILING, RevisionLog, load_head, summary

SCHEMA_VERSION = 2
"""1: the tables below but execution_agents. 2: execution_agents, filled from the revisions at the upgrade."""

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
CREATE INDEX IF NOT EXISTS revisions_keyed
    ON revisions (execution_id, revision, agent_id, client_patch_id) WHERE client_patch_id != '';
CREATE TABLE IF NOT EXISTS snapshots (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    revision     INTEGER NOT NULL,
    state_json   TEXT NOT NULL,
    state_hash   TEXT NOT NULL,
    PRIMARY KEY (execution_id, revision)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS execution_agents (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    agent_id     TEXT NOT NULL,
    PRIMARY KEY (execution_id, agent_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS revisions_name_their_agents AFTER INSERT ON revisions BEGIN
    INSERT OR IGNORE INTO execution_agents VALUES (NEW.execution_id, NEW.agent_id);
END;
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


class SqliteRevisionLog(RevisionLog):
    """A RevisionLog in one SQLite database file (created if missing)."""

    def __init__(self, path: str | Path, max_bytes: int | None = None, inline_budget: float = INLINE_BUDGET) -> None:
        """`max_bytes` caps the database file: a commit that would grow it further fails with
        StorageFullError, as a full disk would. `inline_budget`: the seconds a group commit on the event
        loop may take before commits move to the writer's thread for a while (Writer explains)."""
        self._path = str(path)
        self._writer = Writer(path, "revision log", max_bytes, inline_budget)
        self._reader = Database(path, what="revision log")
        self._lock_file: IO[bytes] | None = None

    async def open(self) -> None:
        if self._lock_file is not None:
            return
        self._lock_file = _lock_exclusively(Path(self._path + ".lock"))
        try:
            await self._writer.open()
            version = await self._writer.value("PRAGMA user_version")
            if version not in (0, 1, SCHEMA_VERSION):
                raise StorageError(f"{self._path}: schema version {version} is not {SCHEMA_VERSION}")
            upgrade = _FILL_AGENTS if version == 1 else ""  # the agents of the revisions committed until now
            await self._writer.script(f"BEGIN; {_DDL} {upgrade} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            await self._reader.open()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await self._reader.close()
        await self._writer.close()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the lock
            self._lock_file = None

    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        try:
            await self._writer.transaction(
                insert("executions", EXECUTION_COLUMNS, [execution_row(execution)]),
                insert("snapshots", SNAPSHOT_COLUMNS, [snapshot_row(genesis)]),
            )
        except DuplicateRowError as e:
            raise AlreadyExistsError(f"execution {execution.execution_id!r} already exists") from e

    async def find_execution(self, execution_id: str) -> ExecutionRecord | None:
        rows = await self._reader.rows(f"SELECT {_EXECUTIONS} FROM executions WHERE execution_id = ?", execution_id)
        return ExecutionRecord(*rows[0]) if rows else None

    async def load_execution(self, execution_id: str, patch_ids: int) -> StoredExecution | None:
        """Two reads for an execution with revisions after its snapshot and no keys before it, at most five,
        where the calls one after another make ten: a cold read's cost is mostly its trips to the reader's
        thread."""
        rows = await self._reader.rows(
            f"SELECT {_EXECUTIONS_OF_E}, e.compact_revision, s.revision, s.state_json, s.state_hash, "
            "(SELECT COALESCE(MAX(sequence), 0) FROM observations WHERE execution_id = e.execution_id) "
            "FROM executions e LEFT JOIN snapshots s ON s.execution_id = e.execution_id AND s.revision = "
            "(SELECT MAX(revision) FROM snapshots WHERE execution_id = e.execution_id) WHERE e.execution_id = ?",
            execution_id,
        )  # fmt: skip
        if not rows:
            return None
        record, compacted, snapshot, last_observation = load_head(execution_id, rows[0])
        revision = snapshot.revision
        revisions = await self.read_revisions(execution_id, after=revision)
        # compaction drops the revisions up to its snapshot: none keyed before a snapshot at the compact revision
        keyed = await self.patch_ids(execution_id, revision, patch_ids) if revision > compacted else []
        return StoredExecution(record, compacted, snapshot, revisions, keyed, last_observation)

    async def list_summaries(self, prefix: str, after: str, limit: int) -> list[ExecutionSummary]:
        rows = await self._reader.rows(
            "SELECT e.execution_id, e.created_at, e.compact_revision, r.revision, r.committed_at, "
            "(SELECT COUNT(*) FROM execution_agents a WHERE a.execution_id = e.execution_id) "
            "FROM executions e LEFT JOIN revisions r ON r.execution_id = e.execution_id AND r.revision = "
            "(SELECT MAX(revision) FROM revisions WHERE execution_id = e.execution_id) "
            "WHERE e.execution_id > ? AND e.execution_id >= ? AND e.execution_id < ? "
            "ORDER BY e.execution_id LIMIT ?",
            after, prefix, prefix + ID_CEILING, limit,
        )  # fmt: skip
        agents = await self._agents([row[0] for row in rows])
        return [
            summary(execution_id, created_at, compacted, head, committed_at, agents.get(execution_id, ()), count)
            for execution_id, created_at, compacted, head, committed_at, count in rows
        ]

    async def _agents(self, execution_ids: list[str]) -> dict[str, tuple[str, ...]]:
        """The first MAX_LISTED_AGENTS agents of each execution, by id."""
        if not execution_ids:
            return {}
        rows = await self._reader.rows(
            "SELECT execution_id, agent_id FROM (SELECT execution_id, agent_id, ROW_NUMBER() OVER "
            "(PARTITION BY execution_id ORDER BY agent_id) AS n FROM execution_agents WHERE execution_id IN "
            f"({', '.join('?' * len(execution_ids))})) WHERE n <= ? ORDER BY execution_id, agent_id",
            *execution_ids, MAX_LISTED_AGENTS,
        )  # fmt: skip
        found: dict[str, list[str]] = {}
        for execution_id, agent_id in rows:
            found.setdefault(execution_id, []).append(agent_id)
        return {execution_id: tuple(agents) for execution_id, agents in found.items()}

    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        head = await self.head_revision(execution_id)  # one server writes this file: nothing commits meanwhile
        await self._writer.transaction(
            *((f"DELETE FROM {table} WHERE execution_id = ?", (execution_id,)) for table in HOLDING_EXECUTIONS)
        )
        return head

    async def commit(self, batch: Batch) -> None:
        await self._writer.commit(
            insert("revisions", REVISION_COLUMNS, [revision_row(r) for r in batch.revisions]),
            insert("snapshots", SNAPSHOT_COLUMNS, [snapshot_row(s) for s in batch.snapshots]),
            insert("observations", OBSERVATION_COLUMNS, [observation_row(o) for o in batch.observations]),
            rows=len(batch.revisions) + len(batch.snapshots) + len(batch.observations),
        )

    async def head_revision(self, execution_id: str) -> int:
        await self._require(execution_id)
        head = await self._reader.value("SELECT MAX(revision) FROM revisions WHERE execution_id = ?", execution_id)
        return head if head is not None else await self.compact_revision(execution_id)

    async def read_revisions(
        self, execution_id: str, after: int, up_to: int | None = None, limit: int | None = None
    ) -> list[RevisionRecord]:
        rows = await self._reader.rows(
            f"SELECT {_REVISIONS} FROM revisions WHERE execution_id = ? AND revision > ? AND revision <= ? "
            "ORDER BY revision LIMIT ?",
            execution_id, after, _MAX_INT if up_to is None else up_to, -1 if limit is None else limit,
        )  # fmt: skip
        if not rows:
            await self._require(execution_id)  # none: is there such an execution?
        return [RevisionRecord(*row) for row in rows]

    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        await self._require(execution_id)
        rows = await self._reader.rows(
            f"SELECT {_SNAPSHOTS} FROM snapshots WHERE execution_id = ? "
            "AND revision <= ? ORDER BY revision DESC LIMIT 1",
            execution_id, _MAX_INT if at_most is None else at_most,
        )  # fmt: skip
        return SnapshotRecord(*rows[0]) if rows else None

    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str) -> RevisionRecord | None:
        await self._require(execution_id)
        rows = await self._reader.rows(FIND_PATCH, execution_id, agent_id, client_patch_id)
        return RevisionRecord(*rows[0]) if rows else None

    async def patch_ids(self, execution_id: str, up_to: int, limit: int) -> list[tuple[str, str, int]]:
        rows = await self._reader.rows(
            "SELECT agent_id, client_patch_id, revision FROM revisions "
            "WHERE execution_id = ? AND revision <= ? AND client_patch_id != '' ORDER BY revision DESC LIMIT ?",
            execution_id, up_to, limit,
        )  # fmt: skip
        if not rows:
            await self._require(execution_id)
        return [(row[0], row[1], row[2]) for row in rows]

    async def read_observations(
        self, execution_id: str, after: int, limit: int | None = None
    ) -> list[ObservationRecord]:
        await self._require(execution_id)
        rows = await self._reader.rows(
            f"SELECT {_OBSERVATIONS} FROM observations WHERE execution_id = ? AND sequence > ? "
            "ORDER BY sequence LIMIT ?",
            execution_id, after, -1 if limit is None else limit,
        )  # fmt: skip
        return [ObservationRecord(*row) for row in rows]

    async def last_observation_sequence(self, execution_id: str) -> int:
        await self._require(execution_id)
        last = await self._reader.value("SELECT MAX(sequence) FROM observations WHERE execution_id = ?", execution_id)
        return last or 0

    async def compact(self, execution_id: str, up_to: int, lease_epoch: int | None = None) -> None:
        await self._require(execution_id)
        found = await self._writer.value(
            "SELECT COUNT(*) FROM snapshots WHERE execution_id = ? AND revision = ?", execution_id, up_to
        )
        if not found:
            raise OutOfRangeError(f"no snapshot at revision {up_to} to compact to")
        await self._writer.transaction(
            ("DELETE FROM revisions WHERE execution_id = ? AND revision <= ?", (execution_id, up_to)),
            ("DELETE FROM snapshots WHERE execution_id = ? AND revision < ?", (execution_id, up_to)),
            (
                "UPDATE executions SET compact_revision = MAX(compact_revision, ?) WHERE execution_id = ?",
                (up_to, execution_id),
            ),
        )

    async def compact_revision(self, execution_id: str) -> int:
        value = await self._reader.value("SELECT compact_revision FROM executions WHERE execution_id = ?", execution_id)
        if value is None:
            raise NotFoundError(f"execution {execution_id!r} not found")
        return int(value)

    async def _require(self, execution_id: str) -> None:
        await self.compact_revision(execution_id)


_FILL_AGENTS = FILL_AGENTS.replace("INSERT", "INSERT OR IGNORE", 1) + ";"
_MAX_INT = (1 << 63) - 1
_EXECUTIONS = ", ".join(EXECUTION_COLUMNS)
_EXECUTIONS_OF_E = ", ".join(f"e.{column}" for column in EXECUTION_COLUMNS)
_REVISIONS = ", ".join(REVISION_COLUMNS)
_SNAPSHOTS = ", ".join(SNAPSHOT_COLUMNS)
_OBSERVATIONS = ", ".join(OBSERVATION_COLUMNS)
FIND_PATCH = (
    f"SELECT {_REVISIONS} FROM revisions INDEXED BY revisions_by_patch_id "
    "WHERE execution_id = ? AND agent_id = ? AND client_patch_id = ? AND client_patch_id != ''"
)
"""A revision by its idempotency key, through the partial index of the keys: the last condition makes it
usable, and without INDEXED BY SQLite prefers the primary key (lacking statistics), reading every revision of
the execution for each lookup."""


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
