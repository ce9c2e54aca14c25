"""Skill versions in the server's SQLite file, beside its revision log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import DuplicateRowError
from ..records import Counts, SkillVersion, StoredHydration
from ..sqlite import Database, Statement, insert
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
    version       INTEGER NOT NULL,
    digest        TEXT NOT NULL,
    folder        TEXT NOT NULL,
    registered_at REAL NOT NULL,
    removed_at    REAL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skill_files (
    name    TEXT NOT NULL,
    version INTEGER NOT NULL,
    path    TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (name, version, path),
    FOREIGN KEY (name, version) REFERENCES skill_versions (name, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skill_graph_records (
    name    TEXT NOT NULL,
    version INTEGER NOT NULL,
    tag     TEXT NOT NULL,
    saved   INTEGER NOT NULL,
    record  BLOB NOT NULL,
    PRIMARY KEY (name, version, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS skill_graph_records_by_saved ON skill_graph_records (saved);
CREATE TABLE IF NOT EXISTS macro_revisions (
    key_json TEXT PRIMARY KEY,
    level    INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS macro_evidence (
    key_json          TEXT PRIMARY KEY,
    uses              INTEGER NOT NULL,
    expansions        INTEGER NOT NULL,
    verifier_failures INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kept_hydrations (
    sequence     INTEGER PRIMARY KEY,
    hydration_id TEXT NOT NULL UNIQUE,
    record_json  TEXT NOT NULL,
    expanded     TEXT NOT NULL DEFAULT ''
);
"""
ROWS_PER_STATEMENT = 1000
"""Rows one statement writes: a report or a library change may change the evidence of many macro keys."""


class SqliteSkillStore(SkillStore):
    """Skill versions in a SQLite file (the state server's database, beside its revision log)."""

    def __init__(self, path: str | Path) -> None:
        self._db = Database(path, _DDL, "skill store")

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def add(self, version: SkillVersion) -> None:
        v = version
        files = [(v.name, v.version, path, content) for path, content in sorted(v.files.items())]
        try:
            await self._db.transaction(
                insert(
                    "skill_versions",
                    ("name", "version", "digest", "folder", "registered_at"),
                    [(v.name, v.version, v.digest, v.folder, v.registered_at)],
                ),
                insert("skill_files", ("name", "version", "path", "content"), files),
            )
        except DuplicateRowError as e:
            raise DuplicateRowError(f"skill {v.name!r} version {v.version} is already stored") from e

    async def mark_removed(self, name: str, version: int, removed_at: float) -> None:
        await self._db.execute(
            "UPDATE skill_versions SET removed_at = ? WHERE name = ? AND version = ?", removed_at, name, version
        )

    async def current(self) -> list[SkillVersion]:
        rows = await self._db.rows(CURRENT)
        return [await self._with_files(row) for row in rows]

    async def current_versions(self) -> dict[str, int]:
        return {name: int(version) for name, version in await self._db.rows(CURRENT_VERSIONS)}

    async def get(self, name: str, version: int) -> SkillVersion | None:
        rows = await self._db.rows(
            f"SELECT {VERSION_COLUMNS} FROM skill_versions WHERE name = ? AND version = ?", name, version
        )
        return await self._with_files(rows[0]) if rows else None

    async def newest_version(self, name: str) -> int:
        return int(await self._db.value("SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE name = ?", name))

    async def graph_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        rows = await self._db.rows(GRAPH_RECORDS.format(tag="?"), tag)
        return {(name, int(version)): bytes(record) for name, version, record in rows}

    async def graph_record(self, tag: str, name: str, version: int) -> bytes | None:
        rows = await self._db.rows(GRAPH_RECORD.format("?", "?", "?"), tag, name, version)
        return bytes(rows[0][0]) if rows else None

    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        number = await self._db.value("SELECT COALESCE(MAX(saved), 0) + 1 FROM skill_graph_records")
        rows = [(name, version, tag, number, record) for name, version, record in records]
        await self._db.transaction(
            *_each("INSERT OR REPLACE INTO skill_graph_records VALUES {}", "(?, ?, ?, ?, ?)", rows)
        )

    async def forget_graph_records(self, tag: str) -> None:
        superseded, other_tags = FORGET_GRAPH_RECORDS
        await self._db.transaction((superseded, ()), (other_tags.format(tag="?"), (tag, tag)))

    async def macro_revisions(self) -> dict[str, int | None]:
        return {key: level for key, level in await self._db.rows("SELECT key_json, level FROM macro_revisions")}

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        await self._db.execute("INSERT OR REPLACE INTO macro_revisions VALUES (?, ?)", key_json, level)

    async def _with_files(self, row: Any) -> SkillVersion:
        name, version = row[:2]
        files = await self._db.rows(
            "SELECT path, content FROM skill_files WHERE name = ? AND version = ? ORDER BY path", name, version
        )
        return skill_version(row, {p: bytes(c) for p, c in files})

    async def macro_evidence(self) -> dict[str, Counts]:
        rows = await self._db.rows("SELECT key_json, uses, expansions, verifier_failures FROM macro_evidence")
        return {key: (uses, expansions, failures) for key, uses, expansions, failures in rows}

    async def save_evidence(
        self,
        evidence: Mapping[str, Counts | None],
        levels: Mapping[str, int | None] | None = None,
        reported: str | None = None,
    ) -> None:
        kept = [(key, *counts) for key, counts in sorted(evidence.items()) if counts is not None]
        gone = [(key,) for key, counts in sorted(evidence.items()) if counts is None]
        await self._db.transaction(
            *_each("INSERT OR REPLACE INTO macro_evidence VALUES {}", "(?, ?, ?, ?)", kept),
            *_each("DELETE FROM macro_evidence WHERE key_json IN ({})", "?", gone, ", "),
            *_each("INSERT OR REPLACE INTO macro_revisions VALUES {}", "(?, ?)", sorted((levels or {}).items())),
            ("DELETE FROM kept_hydrations WHERE hydration_id = ?", (reported,)) if reported is not None else None,
        )

    async def keep_hydration(self, hydration: StoredHydration, keep: int) -> None:
        await self._db.transaction(
            (
                "INSERT OR REPLACE INTO kept_hydrations (hydration_id, record_json) VALUES (?, ?)",
                (hydration.hydration_id, hydration.record_json),
            ),
            (
                "DELETE FROM kept_hydrations WHERE sequence <= "
                "(SELECT sequence FROM kept_hydrations ORDER BY sequence DESC LIMIT 1 OFFSET ?)",
                (keep,),
            ),
        )

    async def add_expansion(self, hydration_id: str, macro_id: str) -> None:
        await self._db.execute(
            "UPDATE kept_hydrations SET expanded = expanded || ' ' || ? "
            "WHERE hydration_id = ? AND instr(expanded || ' ', ' ' || ? || ' ') = 0",
            macro_id, hydration_id, macro_id,
        )  # fmt: skip

    async def kept_hydration(self, hydration_id: str) -> StoredHydration | None:
        rows = await self._db.rows(
            "SELECT record_json, expanded FROM kept_hydrations WHERE hydration_id = ?", hydration_id
        )
        return StoredHydration(hydration_id, rows[0][0], frozenset(rows[0][1].split())) if rows else None


def _each(sql: str, row: str, rows: Sequence[tuple[Any, ...]], between: str = ",") -> list[Statement]:
    """`sql` with `{}` filled by ROWS_PER_STATEMENT `row` placeholders at a time, over every row."""
    statements: list[Statement] = []
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        statements.append((sql.format(between.join([row] * len(chunk))), [value for r in chunk for value in r]))
    return statements
