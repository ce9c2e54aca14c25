"""Where registered skill versions live: the narrow interface every backend implements.

Every version keeps its files, so a restart rebuilds the library from what was registered (Sec2Graph is
deterministic) and any version can be read back. Removing a skill marks its current version removed;
its history stays, and registering the name again continues its numbering.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import SkillVersion

VERSION_COLUMNS = "name, version, digest, folder, registered_at, removed_at"
"""The columns of skill_versions that `skill_version` reads, in its order."""

_CURRENT = (
    "FROM skill_versions AS v "
    "WHERE version = (SELECT MAX(version) FROM skill_versions WHERE name = v.name) AND removed_at IS NULL"
)
CURRENT_VERSIONS = f"SELECT name, version {_CURRENT}"
"""(name, version) of every current skill, in the SQL both SQL backends speak."""
CURRENT = f"SELECT {VERSION_COLUMNS} {_CURRENT} ORDER BY name"
"""The VERSION_COLUMNS of every current skill, by name."""


def skill_version(row: Sequence[Any], files: Mapping[str, bytes]) -> SkillVersion:
    """A version from a row of VERSION_COLUMNS and its files, as both SQL backends read it."""
    name, version, digest, folder, registered_at, removed_at = row
    return SkillVersion(name, version, digest, folder, registered_at, files, removed_at)


class SkillStore(abc.ABC):
    """Storage of skill versions; every backend passes tests/server/storage/skill_store/test_backends.py."""

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
