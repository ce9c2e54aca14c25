"""The skill store on PostgreSQL, beside a PostgreSQL revision log (`skillstate serve --db postgresql://...`)."""

from __future__ import annotations

from typing import Any

from ...errors import DuplicateRowError
from ..postgres import Database
from ..records import SkillVersion
from .base import CURRENT, CURRENT_VERSIONS, VERSION_COLUMNS, SkillStore, skill_version

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
CREATE TABLE IF NOT EXISTS macro_revisions (key_json TEXT PRIMARY KEY, level BIGINT);
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
        rows = await self._db.fetch(CURRENT)
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

    async def macro_revisions(self) -> dict[str, int | None]:
        return {key: level for key, level in await self._db.fetch("SELECT key_json, level FROM macro_revisions")}

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        await self._db.fetch(
            "INSERT INTO macro_revisions VALUES ($1, $2) ON CONFLICT (key_json) DO UPDATE SET level = $2",
            key_json, level,
        )  # fmt: skip

    async def _with_files(self, row: Any) -> SkillVersion:
        name, version = row[:2]
        files = await self._db.fetch(
            "SELECT path, content FROM skill_files WHERE name = $1 AND version = $2 ORDER BY path", name, version
        )
        return skill_version(row, {p: bytes(c) for p, c in files})
