"""Where registered skill versions live: the narrow interface every backend implements.

Every version keeps its files, so a restart rebuilds the library from what was registered (Sec2Graph is
deterministic) and any version can be read back. Removing a skill marks its current version removed;
its history stays, and registering the name again continues its numbering.
"""

from __future__ import annotations

import abc

from ..records import SkillVersion

CURRENT_VERSIONS = (
    "SELECT name, version FROM skill_versions AS v "
    "WHERE version = (SELECT MAX(version) FROM skill_versions WHERE name = v.name) AND removed_at IS NULL"
)
"""(name, version) of every current skill, in the SQL both SQL backends speak."""


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
