"""Skill versions in the server's SQLite file, beside its revision log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import DuplicateRowError
from ..records import SkillVersion
from ..sqlite import Database, insert
from .base import CURRENT, CURRENT_VERSIONS, VERSION_COLUMNS, SkillStore, skill_version

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
CREATE TABLE IF NOT EXISTS macro_revisions (
    key_json TEXT PRIMARY KEY,
    level    INTEGER
) WITHOUT ROWID;
"""


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
