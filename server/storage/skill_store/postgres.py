"""The skill store on PostgreSQL, beside a PostgreSQL revision log (`skillstate serve --db postgresql://...`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import DuplicateRowError
from ..postgres import Database, Statement
from ..records import Counts, SkillVersion, StoredHydration
from .base import (
    CURRENT,
    CURRENT_VERSIONS,
    FORGET_GRAPH_RECORDS,
    GRAPH_RECORD,
    GRAPH_RECORDS,
    VERSION_COLUMNS,
    SkillStore,
    skill_version,
)

_DDL = """
CREATE TABLE IF NOT EXISTS skill_versions (
    name          TEXT NOT NULL,
    version       BIGINT NOT NULL,
    digest        TEXT NOT NULL,
    folder        TEXT NOT NULL,
    registered_at DOUBLE PRECISION NOT NULL,
    removed_at    DOUBLE PRECISION,
    PRIMARY KEY (name, version)
);
CREATE TABLE IF NOT EXISTS skill_files (
    name    TEXT NOT NULL,
    version BIGINT NOT NULL,
    path    TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (name, version, path),
    FOREIGN KEY (name, version) REFERENCES skill_versions (name, version)
);
CREATE TABLE IF NOT EXISTS skill_graph_records (
    name    TEXT NOT NULL,
    version BIGINT NOT NULL,
    tag     TEXT NOT NULL,
    saved   BIGINT NOT NULL,
    record  BYTEA NOT NULL,
    PRIMARY KEY (name, version, tag)
);
CREATE INDEX IF NOT EXISTS skill_graph_records_by_saved ON skill_graph_records (saved);
CREATE TABLE IF NOT EXISTS macro_revisions (key_json TEXT PRIMARY KEY, level BIGINT);
CREATE TABLE IF NOT EXISTS macro_evidence (
    key_json          TEXT PRIMARY KEY,
    uses              BIGINT NOT NULL,
    expansions        BIGINT NOT NULL,
    verifier_failures BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS kept_hydrations (
    sequence     BIGSERIAL PRIMARY KEY,
    hydration_id TEXT NOT NULL UNIQUE,
    record_json  TEXT NOT NULL,
    expanded     TEXT NOT NULL DEFAULT ''
);
"""


class PostgresSkillStore(SkillStore):
    shared = True

    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        self._db = Database(dsn, schema, _DDL, "skill store")

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def add(self, version: SkillVersion) -> None:
        v = version
        files = sorted(v.files.items())
        try:
            await self._db.transaction(
                (
                    "INSERT INTO skill_versions (name, version, digest, folder, registered_at) "
                    "VALUES ($1, $2, $3, $4, $5)",
                    (v.name, v.version, v.digest, v.folder, v.registered_at),
                ),
                (
                    "INSERT INTO skill_files SELECT $1, $2, * FROM unnest($3::text[], $4::bytea[])",
                    (v.name, v.version, [path for path, _ in files], [content for _, content in files]),
                ),
            )
        except DuplicateRowError as e:
            raise DuplicateRowError(f"skill {v.name!r} version {v.version} is already stored") from e

    async def mark_removed(self, name: str, version: int, removed_at: float) -> None:
        await self._db.fetch(
            "UPDATE skill_versions SET removed_at = $1 WHERE name = $2 AND version = $3", removed_at, name, version
        )

    async def current(self) -> list[SkillVersion]:
        rows = await self._db.fetch(CURRENT + ' COLLATE "C"')  # code point order, whatever the database collates
        return [await self._with_files(row) for row in rows]

    async def current_versions(self) -> dict[str, int]:
        return {name: int(version) for name, version in await self._db.fetch(CURRENT_VERSIONS)}

    async def get(self, name: str, version: int) -> SkillVersion | None:
        rows = await self._db.fetch(
            f"SELECT {VERSION_COLUMNS} FROM skill_versions WHERE name = $1 AND version = $2", name, version
        )
        return await self._with_files(rows[0]) if rows else None

    async def newest_version(self, name: str) -> int:
        rows = await self._db.fetch("SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE name = $1", name)
        return int(rows[0][0])

    async def graph_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        rows = await self._db.fetch(GRAPH_RECORDS.format(tag="$1"), tag)
        return {(name, int(version)): bytes(record) for name, version, record in rows}

    async def graph_record(self, tag: str, name: str, version: int) -> bytes | None:
        rows = await self._db.fetch(GRAPH_RECORD.format("$1", "$2", "$3"), tag, name, version)
        return bytes(rows[0][0]) if rows else None

    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        await self._db.fetch(
            "INSERT INTO skill_graph_records (name, version, tag, saved, record) "
            "SELECT n, v, $4::text, (SELECT COALESCE(MAX(saved), 0) + 1 FROM skill_graph_records), r "
            "FROM unnest($1::text[], $2::bigint[], $3::bytea[]) AS u (n, v, r) "
            "ON CONFLICT (name, version, tag) DO UPDATE SET saved = excluded.saved, record = excluded.record",
            [n for n, _, _ in records], [v for _, v, _ in records], [r for _, _, r in records], tag,
        )  # fmt: skip

    async def forget_graph_records(self, tag: str) -> None:
        superseded, other_tags = FORGET_GRAPH_RECORDS
        await self._db.transaction((superseded, ()), (other_tags.format(tag="$1"), (tag,)))

    async def macro_revisions(self) -> dict[str, int | None]:
        return {key: level for key, level in await self._db.fetch("SELECT key_json, level FROM macro_revisions")}

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        await self._db.fetch(
            "INSERT INTO macro_revisions VALUES ($1, $2) ON CONFLICT (key_json) DO UPDATE SET level = $2",
            key_json, level,
        )  # fmt: skip

    async def macro_evidence(self) -> dict[str, Counts]:
        rows = await self._db.fetch("SELECT key_json, uses, expansions, verifier_failures FROM macro_evidence")
        return {key: (int(uses), int(expansions), int(failures)) for key, uses, expansions, failures in rows}

    async def save_evidence(
        self,
        evidence: Mapping[str, Counts | None],
        levels: Mapping[str, int | None] | None = None,
        reported: str | None = None,
    ) -> None:
        kept = sorted((key, counts) for key, counts in evidence.items() if counts is not None)
        gone = sorted(key for key, counts in evidence.items() if counts is None)
        revised = sorted((levels or {}).items())
        statements: list[Statement] = []
        if kept:
            statements.append((
                "INSERT INTO macro_evidence SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) "
                "ON CONFLICT (key_json) DO UPDATE SET uses = EXCLUDED.uses, expansions = EXCLUDED.expansions, "
                "verifier_failures = EXCLUDED.verifier_failures",
                ([k for k, _ in kept], *([c[i] for _, c in kept] for i in range(3))),
            ))  # fmt: skip
        if gone:
            statements.append(("DELETE FROM macro_evidence WHERE key_json = ANY($1::text[])", (gone,)))
        if revised:
            statements.append((
                "INSERT INTO macro_revisions SELECT * FROM unnest($1::text[], $2::bigint[]) "
                "ON CONFLICT (key_json) DO UPDATE SET level = EXCLUDED.level",
                ([k for k, _ in revised], [level for _, level in revised]),
            ))  # fmt: skip
        if reported is not None:
            statements.append(("DELETE FROM kept_hydrations WHERE hydration_id = $1", (reported,)))
        await self._db.transaction(*statements)

    async def keep_hydration(self, hydration: StoredHydration, keep: int) -> None:
        await self._db.transaction(
            (
                "INSERT INTO kept_hydrations (hydration_id, record_json) VALUES ($1, $2) ON CONFLICT (hydration_id) "
                "DO UPDATE SET sequence = DEFAULT, record_json = EXCLUDED.record_json, expanded = ''",
                (hydration.hydration_id, hydration.record_json),
            ),
            (
                "DELETE FROM kept_hydrations WHERE sequence <= "
                "(SELECT sequence FROM kept_hydrations ORDER BY sequence DESC OFFSET $1 LIMIT 1)",
                (keep,),
            ),
        )

    async def add_expansion(self, hydration_id: str, macro_id: str) -> None:
        await self._db.fetch(
            "UPDATE kept_hydrations SET expanded = expanded || ' ' || $2 "
            "WHERE hydration_id = $1 AND strpos(expanded || ' ', ' ' || $2 || ' ') = 0",
            hydration_id, macro_id,
        )  # fmt: skip

    async def kept_hydration(self, hydration_id: str) -> StoredHydration | None:
        rows = await self._db.fetch(
            "SELECT record_json, expanded FROM kept_hydrations WHERE hydration_id = $1", hydration_id
        )
        return StoredHydration(hydration_id, rows[0][0], frozenset(rows[0][1].split())) if rows else None

    async def _with_files(self, row: Any) -> SkillVersion:
        name, version = row[:2]
        files = await self._db.fetch(
            "SELECT path, content FROM skill_files WHERE name = $1 AND version = $2 ORDER BY path", name, version
        )
        return skill_version(row, {p: bytes(c) for p, c in files})
