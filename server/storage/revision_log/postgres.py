"""A RevisionLog on PostgreSQL, through asyncpg: for deployments that outgrow one machine's disk, and the
store that server replicas share.

Selected by a URL (`skillstate serve --db postgresql://user:pass@host/db`). A group commit is one
transaction of one multi-row INSERT per table (`unnest` of column arrays: one round trip per table, however
many rows); PostgreSQL's `synchronous_commit` (on by default) makes it durable before the reply. The unique
keys (execution, revision), (execution, snapshot revision) and (execution, sequence) are what serializes
commits to one execution: a second row for a revision is DuplicateRowError and nothing of its batch.

`schema` puts the tables in a PostgreSQL schema of their own (tests give each test one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from ...errors import (
    AlreadyExistsError,
    DuplicateRowError,
    NotFoundError,
    OutOfRangeError,
    StorageError,
)
from ..postgres import ERRORS, Database, Statement
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
from .base import FILL_AGENTS, HOLDING_EXECUTIONS, ID_CEILING, RevisionLog, load_head, summary
from .leases import LeaseTable
from .postgres_leases import DDL as LEASES_DDL
from .postgres_leases import PostgresLeases, fence_check
from .postgres_tables import DDL as TABLES_DDL
from .postgres_tables import (
    INSERT_EXECUTION,
    INSERT_OBSERVATIONS,
    INSERT_REVISIONS,
    INSERT_SNAPSHOTS,
    SCHEMA_VERSION,
    as_columns,
)

log = logging.getLogger(__name__)

STALLED_TRANSACTION = 2.0
SETTINGS = {"idle_in_transaction_session_timeout": f"{STALLED_TRANSACTION:g}s"}
"""A transaction of a replica that stalls in it (paused, its host frozen or cut off) is ended after this,
with its row locks: a commit holds its leases' rows, which another replica's take waits for."""
CHANNEL = "skillstate_commits"
"""Each commit notifies this channel with `<server>:<execution id>` for every execution it wrote (but those
it holds the lease of: replicas with leases off follow the others' commits this way)."""

_EXECUTIONS = ", ".join(EXECUTION_COLUMNS)
_EXECUTIONS_OF_E = ", ".join(f"e.{column}" for column in EXECUTION_COLUMNS)
_FILL_AGENTS = f"{FILL_AGENTS} ON CONFLICT DO NOTHING"
FIND_PATCH = (
    f"SELECT {', '.join(REVISION_COLUMNS)} FROM revisions "
    "WHERE execution_id = $1 AND agent_id = $2 AND client_patch_id = $3 AND client_patch_id <> ''"
)
"""A revision by its idempotency key; the last condition lets the planner use the partial index on the keys."""


class PostgresRevisionLog(RevisionLog):
    """A RevisionLog in a PostgreSQL database (tables created if missing), shared by any number of servers."""

    shared = True

    def __init__(self, dsn: str, *, schema: str | None = None, pool_size: int = 4) -> None:
        self._db = Database(dsn, schema, TABLES_DDL + LEASES_DDL, "revision log", pool_size, SETTINGS)
        self._server = uuid.uuid4().hex[:12]
        """This server's name in commit notices (so that it does not follow its own commits), and its id as
        the owner of leases."""
        self._leases = PostgresLeases(self._db, self._server, lock_wait=STALLED_TRANSACTION + 1)

    async def open(self) -> None:
        await self._db.open()
        try:
            version = await self._db.value("SELECT value FROM skillstate_meta WHERE key = 'schema_version'")
            if version not in (None, "1", "2", str(SCHEMA_VERSION)):
                raise StorageError(f"{self._where}: schema version {version} is not {SCHEMA_VERSION}")
            upgrade: list[Statement] = [(_FILL_AGENTS, ())] if version == "1" else []  # idempotent: replicas may race
            await self._db.transaction(
                *upgrade,
                (
                    "INSERT INTO skillstate_meta VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE "
                    "SET value = EXCLUDED.value WHERE skillstate_meta.value::int < EXCLUDED.value::int",
                    (str(SCHEMA_VERSION),),
                ),
            )
        except StorageError:
            await self._db.close()
            raise

    @property
    def _where(self) -> str:
        return self._db.where

    @property
    def _channel(self) -> str:
        return f"{CHANNEL}_{self._db.schema}" if self._db.schema else CHANNEL

    async def close(self) -> None:
        await self._leases.close()
        await self._db.close()

    async def changes(self) -> AsyncIterator[str]:
        """LISTEN on the commit channel from a connection of its own (reopened when it drops)."""
        arrived: asyncio.Queue[str] = asyncio.Queue()

        def notice(_connection: Any, _pid: int, _channel: str, payload: str) -> None:
            server, _, execution_id = payload.partition(":")
            if server != self._server:
                arrived.put_nowait(execution_id)

        while self._db.is_open:
            try:
                connection = await asyncpg.connect(self._db.dsn)
            except (OSError, asyncpg.PostgresError) as e:
                log.warning("cannot listen for other servers' commits at %s: %s", self._where, e)
                await asyncio.sleep(1.0)
                continue
            try:
                await connection.add_listener(self._channel, notice)
                while not connection.is_closed():
                    try:
                        yield await asyncio.wait_for(arrived.get(), 1.0)
                    except TimeoutError:
                        continue
            finally:
                with contextlib.suppress(Exception):
                    await connection.close()

    async def create_execution(self, execution: ExecutionRecord, genesis: SnapshotRecord) -> None:
        try:
            await self._db.transaction(
                (INSERT_EXECUTION, execution_row(execution)),
                (INSERT_SNAPSHOTS, as_columns([snapshot_row(genesis)], len(SNAPSHOT_COLUMNS))),
            )
        except DuplicateRowError as e:
            raise AlreadyExistsError(f"execution {execution.execution_id!r} already exists") from e

    async def find_execution(self, execution_id: str) -> ExecutionRecord | None:
        rows = await self._db.fetch(f"SELECT {_EXECUTIONS} FROM executions WHERE execution_id = $1", execution_id)
        return ExecutionRecord(*rows[0]) if rows else None

    async def load_execution(self, execution_id: str, patch_ids: int) -> StoredExecution | None:
        """Three reads in one repeatable-read transaction, from one snapshot of the database: another server
        compacting meanwhile cannot take away the revisions after the snapshot read."""
        newest = "(SELECT MAX(revision) FROM snapshots WHERE execution_id = $1)"
        heads, revisions, keyed = await self._db.fetch_together(
            (
                f"SELECT {_EXECUTIONS_OF_E}, e.compact_revision, s.revision, s.state_json, s.state_hash, "
                "(SELECT COALESCE(MAX(sequence), 0) FROM observations WHERE execution_id = $1) FROM executions e "
                f"LEFT JOIN snapshots s ON s.execution_id = e.execution_id AND s.revision = {newest} "
                "WHERE e.execution_id = $1",
                (execution_id,),
            ),
            (
                f"SELECT {', '.join(REVISION_COLUMNS)} FROM revisions WHERE execution_id = $1 "
                f"AND revision > {newest} ORDER BY revision",
                (execution_id,),
            ),
            (
                "SELECT agent_id, client_patch_id, revision FROM revisions WHERE execution_id = $1 "
                f"AND revision <= {newest} AND client_patch_id != '' ORDER BY revision DESC LIMIT $2",
                (execution_id, patch_ids),
            ),
        )
        if not heads:
            return None
        record, compacted, snapshot, last_observation = load_head(execution_id, heads[0])
        after = [RevisionRecord(*row) for row in revisions]
        keys = [(row[0], row[1], row[2]) for row in keyed]
        return StoredExecution(record, compacted, snapshot, after, keys, last_observation)

    async def list_summaries(self, prefix: str, after: str, limit: int) -> list[ExecutionSummary]:
        rows = await self._db.fetch(
            "SELECT e.execution_id, e.created_at, e.compact_revision, r.revision, r.committed_at, "
            "(SELECT COUNT(*) FROM execution_agents a WHERE a.execution_id = e.execution_id), "
            "ARRAY(SELECT agent_id FROM execution_agents a WHERE a.execution_id = e.execution_id "
            "ORDER BY agent_id COLLATE \"C\" LIMIT $4) "
            "FROM executions e LEFT JOIN LATERAL (SELECT revision, committed_at FROM revisions "
            "WHERE execution_id = e.execution_id ORDER BY revision DESC LIMIT 1) r ON TRUE "
            "WHERE e.execution_id COLLATE \"C\" > $1 AND e.execution_id COLLATE \"C\" >= $2 "
            "AND e.execution_id COLLATE \"C\" < $3 ORDER BY e.execution_id COLLATE \"C\" LIMIT $5",
            after, prefix, prefix + ID_CEILING, MAX_LISTED_AGENTS, limit,
        )  # fmt: skip
        return [
            summary(execution_id, created_at, int(compacted), head, committed_at, tuple(agents), int(count))
            for execution_id, created_at, compacted, head, committed_at, count, agents in rows
        ]

    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        try:
            async with self._db.pool.acquire() as connection, connection.transaction():
                if lease_epoch is not None:
                    (sql, parameters), test = fence_check(self._server, {execution_id: lease_epoch})
                    test(await connection.fetch(sql, *parameters))
                # the row lock waits for commits in flight that refer to it, and holds off later ones (which
                # then find no execution to refer to: a lost race, see `commit`)
                compacted = await connection.fetchval(
                    "SELECT compact_revision FROM executions WHERE execution_id = $1 FOR UPDATE", execution_id
                )
                if compacted is None:
                    raise NotFoundError(f"execution {execution_id!r} not found")
                head = await connection.fetchval(
                    "SELECT MAX(revision) FROM revisions WHERE execution_id = $1", execution_id
                )
                await connection.execute("SELECT pg_notify($1, $2)", self._channel, f"{self._server}:{execution_id}")
                for table in HOLDING_EXECUTIONS:
                    await connection.execute(f"DELETE FROM {table} WHERE execution_id = $1", execution_id)
        except ERRORS as e:
            raise StorageError(f"deleting execution {execution_id!r} at {self._where} failed: {e}") from e
        return int(head) if head is not None else int(compacted)

    async def commit(self, batch: Batch) -> None:
        """Commit the batch in one transaction; under leases (a fence), with no notice: nobody else holds the
        executions it writes, so nobody follows their commits."""
        fence = batch.fence
        written = sorted({r.execution_id for r in batch.revisions} | {o.execution_id for o in batch.observations})
        statements: list[Statement] = [
            ("SELECT pg_notify($1, $2)", (self._channel, f"{self._server}:{execution_id}"))
            for execution_id in written
            if execution_id not in fence
        ]
        revisions = [(*revision_row(r), fence.get(r.execution_id, 0)) for r in batch.revisions]
        for sql, rows, width in (
            (INSERT_REVISIONS, revisions, len(REVISION_COLUMNS) + 1),
            (INSERT_SNAPSHOTS, [snapshot_row(s) for s in batch.snapshots], len(SNAPSHOT_COLUMNS)),
            (INSERT_OBSERVATIONS, [observation_row(o) for o in batch.observations], len(OBSERVATION_COLUMNS)),
        ):
            if rows:
                statements.append((sql, as_columns(rows, width)))
        check = fence_check(self._server, fence) if fence else None
        await self._db.transaction(*statements, check=check)

    def leases(self) -> LeaseTable:
        return self._leases

    async def head_revision(self, execution_id: str) -> int:
        await self._require(execution_id)
        head = await self._db.value("SELECT MAX(revision) FROM revisions WHERE execution_id = $1", execution_id)
        return int(head) if head is not None else await self.compact_revision(execution_id)

    async def read_revisions(
        self, execution_id: str, after: int, up_to: int | None = None, limit: int | None = None
    ) -> list[RevisionRecord]:
        await self._require(execution_id)
        rows = await self._db.fetch(
            f"SELECT {', '.join(REVISION_COLUMNS)} FROM revisions WHERE execution_id = $1 AND revision > $2 "
            "AND ($3::bigint IS NULL OR revision <= $3) ORDER BY revision LIMIT $4",
            execution_id, after, up_to, limit,
        )  # fmt: skip
        return [RevisionRecord(*row) for row in rows]

    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        await self._require(execution_id)
        rows = await self._db.fetch(
            f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM snapshots WHERE execution_id = $1 "
            "AND ($2::bigint IS NULL OR revision <= $2) ORDER BY revision DESC LIMIT 1",
            execution_id, at_most,
        )  # fmt: skip
        return SnapshotRecord(*rows[0]) if rows else None

    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str) -> RevisionRecord | None:
        await self._require(execution_id)
        rows = await self._db.fetch(FIND_PATCH, execution_id, agent_id, client_patch_id)
        return RevisionRecord(*rows[0]) if rows else None

    async def patch_ids(self, execution_id: str, up_to: int, limit: int) -> list[tuple[str, str, int]]:
        await self._require(execution_id)
        rows = await self._db.fetch(
            "SELECT agent_id, client_patch_id, revision FROM revisions "
            "WHERE execution_id = $1 AND revision <= $2 AND client_patch_id != '' ORDER BY revision DESC LIMIT $3",
            execution_id, up_to, limit,
        )  # fmt: skip
        return [(row[0], row[1], row[2]) for row in rows]

    async def read_observations(
        self, execution_id: str, after: int, limit: int | None = None
    ) -> list[ObservationRecord]:
        await self._require(execution_id)
        rows = await self._db.fetch(
            f"SELECT {', '.join(OBSERVATION_COLUMNS)} FROM observations WHERE execution_id = $1 AND sequence > $2 "
            "ORDER BY sequence LIMIT $3",
            execution_id, after, limit,
        )  # fmt: skip
        return [ObservationRecord(*row) for row in rows]

    async def last_observation_sequence(self, execution_id: str) -> int:
        await self._require(execution_id)
        last = await self._db.value("SELECT MAX(sequence) FROM observations WHERE execution_id = $1", execution_id)
        return int(last or 0)

    async def compact(self, execution_id: str, up_to: int, lease_epoch: int | None = None) -> None:
        await self._require(execution_id)
        found = await self._db.value(
            "SELECT COUNT(*) FROM snapshots WHERE execution_id = $1 AND revision = $2", execution_id, up_to
        )
        if not found:
            raise OutOfRangeError(f"no snapshot at revision {up_to} to compact to")
        await self._db.transaction(
            ("DELETE FROM revisions WHERE execution_id = $1 AND revision <= $2", (execution_id, up_to)),
            ("DELETE FROM snapshots WHERE execution_id = $1 AND revision < $2", (execution_id, up_to)),
            (
                "UPDATE executions SET compact_revision = GREATEST(compact_revision, $1) WHERE execution_id = $2",
                (up_to, execution_id),
            ),
            check=fence_check(self._server, {execution_id: lease_epoch}) if lease_epoch is not None else None,
        )

    async def compact_revision(self, execution_id: str) -> int:
        value = await self._db.value("SELECT compact_revision FROM executions WHERE execution_id = $1", execution_id)
        if value is None:
            raise NotFoundError(f"execution {execution_id!r} not found")
        return int(value)

    async def _require(self, execution_id: str) -> None:
        await self.compact_revision(execution_id)
