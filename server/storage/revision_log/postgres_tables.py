"""The PostgreSQL revision log's tables (their DDL and its schema version) and the multi-row INSERTs a group
commit writes them with: one `unnest` of column arrays per table, one round trip however many rows."""

from __future__ import annotations

from typing import Any

from ..records import EXECUTION_COLUMNS, OBSERVATION_COLUMNS, REVISION_COLUMNS, SNAPSHOT_COLUMNS

SCHEMA_VERSION = 3
"""1: the tables below but execution_agents. 2: execution_agents, filled from the revisions at the upgrade.
3: leases (postgres_leases.py): the replicas and leases tables, and each revision's lease epoch."""

DDL = """
CREATE TABLE IF NOT EXISTS skillstate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS executions (
    execution_id     TEXT PRIMARY KEY,
    schema_json      TEXT NOT NULL,
    created_at       DOUBLE PRECISION NOT NULL,
    compact_revision BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS revisions (
    execution_id       TEXT NOT NULL REFERENCES executions(execution_id),
    revision           BIGINT NOT NULL,
    agent_id           TEXT NOT NULL,
    base_revision      BIGINT NOT NULL,
    patch_json         TEXT NOT NULL,
    applied_patch_json TEXT NOT NULL,
    action_json        TEXT NOT NULL,
    client_patch_id    TEXT NOT NULL,
    resolutions_json   TEXT NOT NULL,
    state_hash         TEXT NOT NULL,
    committed_at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (execution_id, revision)
);
CREATE INDEX IF NOT EXISTS revisions_by_patch_id
    ON revisions (execution_id, agent_id, client_patch_id) WHERE client_patch_id <> '';
CREATE INDEX IF NOT EXISTS revisions_keyed
    ON revisions (execution_id, revision, agent_id, client_patch_id) WHERE client_patch_id <> '';
CREATE TABLE IF NOT EXISTS snapshots (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    revision     BIGINT NOT NULL,
    state_json   TEXT NOT NULL,
    state_hash   TEXT NOT NULL,
    PRIMARY KEY (execution_id, revision)
);
CREATE INDEX IF NOT EXISTS executions_by_code_point ON executions (execution_id COLLATE "C");
CREATE TABLE IF NOT EXISTS execution_agents (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    agent_id     TEXT NOT NULL,
    PRIMARY KEY (execution_id, agent_id)
);
CREATE TABLE IF NOT EXISTS observations (
    execution_id TEXT NOT NULL REFERENCES executions(execution_id),
    sequence     BIGINT NOT NULL,
    to_address   TEXT NOT NULL,
    source       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    published_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (execution_id, sequence)
);
"""

_REVISION_TYPES = (
    "text",
    "bigint",
    "text",
    "bigint",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "float8",
    "bigint",
)
"""The revisions' columns and, last, the lease epoch they were committed under."""
_SNAPSHOT_TYPES = ("text", "bigint", "text", "text")
_OBSERVATION_TYPES = ("text", "bigint", "text", "text", "text", "text", "float8")


def _unnest_insert(table: str, columns: tuple[str, ...], types: tuple[str, ...]) -> str:
    arrays = ", ".join(f"${i}::{kind}[]" for i, kind in enumerate(types, start=1))
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays})"


INSERT_EXECUTION = f"INSERT INTO executions ({', '.join(EXECUTION_COLUMNS)}) VALUES ($1, $2, $3)"
INSERT_REVISIONS = (  # and their agents, in the same round trip, in one order (replicas lock them alike)
    f"WITH inserted AS ({_unnest_insert('revisions', (*REVISION_COLUMNS, 'lease_epoch'), _REVISION_TYPES)} "
    "RETURNING execution_id, agent_id) "
    "INSERT INTO execution_agents SELECT DISTINCT execution_id, agent_id FROM inserted "
    "ORDER BY execution_id, agent_id ON CONFLICT DO NOTHING"
)
INSERT_SNAPSHOTS = _unnest_insert("snapshots", SNAPSHOT_COLUMNS, _SNAPSHOT_TYPES)
INSERT_OBSERVATIONS = _unnest_insert("observations", OBSERVATION_COLUMNS, _OBSERVATION_TYPES)


def as_columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as one array per column, for `unnest`."""
    return [[row[i] for row in rows] for i in range(width)] if rows else [[] for _ in range(width)]
