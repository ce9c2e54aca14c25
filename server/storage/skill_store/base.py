"""Where registered skill versions live: a narrow interface, an in-memory backend and a SQLite one.

Every version keeps its files, so a restart rebuilds the library from what was registered (Sec2Graph is
deterministic) and any version can be read back. Removing a skill marks its current version removed;
its history stays, and registering the name again continues its numbering.
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiosqlite

from ...errors import DuplicateRowError, StorageError
from ..revision_log.sqlite import connect


@dataclass(frozen=True)
class SkillVersion:
    name: str
    version: int
    digest: str
    folder: str
    registered_at: float
    files: Mapping[str, bytes] = field(repr=False)
    removed_at: float | None = None


class SkillStore(abc.ABC):
    """Storage of skill versions; every backend passes tests/server/storage/test_skill_store.py."""

    shared = False
    """Whether other servers may register and remove skills here too (PostgreSQL)."""

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def add(self, version: SkillVersion) -> None:
        """Store a new version; DuplicateRowError if (name, version) is taken."""

    @abc.abstractmethod
    async def mark_removed(self, name: str, version: int, removed_at: float) -> None: ...

    @abc.abstractmethod
    async def current(self) -> list[SkillVersion]:
        """The newest version of every name whose newest version is not removed, by name."""

    async def current_versions(self) -> dict[str, int]:
        """{name: version} of `current()`, without reading files."""
        return {version.name: version.version for version in await self.current()}

    @abc.abstractmethod
    async def get(self, name: str, version: int) -> SkillVersion | None: ...

    @abc.abstractmethod
    async def newest_version(self, name: str) -> int:
        """The highest version ever stored under the name (removed or not); 0 if none."""

    @abc.abstractmethod
    async def macro_revisions(self) -> dict[str, int | None]:
        """What execution evidence decided about macros: {macro key (JSON): default level, or None if split}."""

    @abc.abstractmethod
    async def save_macro_revision(self, key_json: str, level: int | None) -> None: ...


class MemorySkillStore(SkillStore):
    def __init__(self) -> None:
        self._versions: dict[tuple[str, int], SkillVersion] = {}
        self._revisions: dict[str, int | None] = {}

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def add(self, version: SkillVersion) -> None:
        key = (version.name, version.version)
        if key in self._versions:
            raise DuplicateRowError(f"skill {version.name!r} version {version.version} is already stored")
        self._versions[key] = version

    async def mark_removed(self, name: str, version: int, removed_at: float) -> None:
        if (name, version) in self._versions:
            self._versions[name, version] = replace(self._versions[name, version], removed_at=removed_at)

    async def current(self) -> list[SkillVersion]:
        newest: dict[str, SkillVersion] = {}
        for (name, _), version in sorted(self._versions.items()):
            newest[name] = version
        return [v for _, v in sorted(newest.items()) if v.removed_at is None]

    async def get(self, name: str, version: int) -> SkillVersion | None:
        return self._versions.get((name, version))

    async def newest_version(self, name: str) -> int:
        return max((number for (n, number) in self._versions if n == name), default=0)

    async def macro_revisions(self) -> dict[str, int | None]:
        return dict(self._revisions)

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        self._revisions[key_json] = level


_CURRENT_VERSIONS = (
    "SELECT name, version FROM skill_versions AS v "
    "WHERE version = (SELECT MAX(version) FROM skill_versions WHERE name = v.name) AND removed_at IS NULL"
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
CREATE TABLE IF NOT EXISTS macro_revisions (
    key_json TEXT PRIMARY KEY,
    level    INTEGER
) WITHOUT ROWID;
"""


class SqliteSkillStore(SkillStore):
    """Skill versions in a SQLite file (the state server's database, beside its revision log)."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._db: aiosqlite.Connection | None = None

    async def open(self) -> None:
        if self._db is not None:
            return
        try:
            self._db = await connect(self._path, _DDL)
        except sqlite3.Error as e:
            await self.close()
            raise StorageError(f"cannot open {self._path}: {e}") from e

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StorageError("the skill store is not open")
        return self._db

    async def add(self, version: SkillVersion) -> None:
        row = (version.name, version.version, version.digest, version.folder, version.registered_at)
        files = [(version.name, version.version, path, content) for path, content in sorted(version.files.items())]
        try:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                await self._conn.execute(
                    "INSERT INTO skill_versions (name, version, digest, folder, registered_at) VALUES (?, ?, ?, ?, ?)",
                    row,
                )
                await self._conn.executemany("INSERT INTO skill_files VALUES (?, ?, ?, ?)", files)
                await self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as e:
            raise DuplicateRowError(f"skill {version.name!r} version {version.version} is already stored") from e
        except sqlite3.Error as e:
            raise StorageError(f"storing skill {version.name!r} in {self._path} failed: {e}") from e

    async def mark_removed(self, name: str, version: int, removed_at: float) -> None:
        await self._write(
            "UPDATE skill_versions SET removed_at = ? WHERE name = ? AND version = ?", removed_at, name, version
        )

    async def current(self) -> list[SkillVersion]:
        rows = await self._rows(
            "SELECT name, version, digest, folder, registered_at, removed_at FROM skill_versions AS v "
            "WHERE version = (SELECT MAX(version) FROM skill_versions WHERE name = v.name) AND removed_at IS NULL "
            "ORDER BY name"
        )
        return [await self._with_files(row) for row in rows]

    async def current_versions(self) -> dict[str, int]:
        rows = await self._rows(_CURRENT_VERSIONS)
        return {name: int(version) for name, version in rows}

    async def get(self, name: str, version: int) -> SkillVersion | None:
        rows = await self._rows(
            "SELECT name, version, digest, folder, registered_at, removed_at FROM skill_versions "
            "WHERE name = ? AND version = ?",
            name,
            version,
        )
        return await self._with_files(rows[0]) if rows else None

    async def newest_version(self, name: str) -> int:
        rows = await self._rows("SELECT COALESCE(MAX(version), 0) FROM skill_versions WHERE name = ?", name)
        return int(rows[0][0])

    async def macro_revisions(self) -> dict[str, int | None]:
        return {key: level for key, level in await self._rows("SELECT key_json, level FROM macro_revisions")}

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        await self._write("INSERT OR REPLACE INTO macro_revisions VALUES (?, ?)", key_json, level)

    async def _with_files(self, row: Any) -> SkillVersion:
        name, version, digest, folder, registered_at, removed_at = row
        files = await self._rows(
            "SELECT path, content FROM skill_files WHERE name = ? AND version = ? ORDER BY path", name, version
        )
        return SkillVersion(name, version, digest, folder, registered_at, {p: bytes(c) for p, c in files}, removed_at)

    async def _rows(self, sql: str, *params: Any) -> list[Any]:
        try:
            async with self._conn.execute(sql, params) as cursor:
                return list(await cursor.fetchall())
        except sqlite3.Error as e:
            raise StorageError(f"read from {self._path} failed: {e}") from e

    async def _write(self, sql: str, *params: Any) -> None:
        try:
            await self._conn.execute(sql, params)
        except sqlite3.Error as e:
            raise StorageError(f"write to {self._path} failed: {e}") from e
