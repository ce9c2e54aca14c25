"""Where registered skill versions live: the narrow interface every backend implements.

Every version keeps its files, so a restart rebuilds the library from what was registered (Sec2Graph is
deterministic) and any version can be read back. Removing a skill marks its current version removed;
its history stays, and registering the name again continues its numbering.

Beside the versions, each current version's graph record (server/skills/records.py: its loaded package and
graph, under the tag of the code that made them), so that a restart need not load and build them again; and
what ReZip needs to go on after a restart: the levels execution evidence decided per
macro key, the evidence counted since (per macro key), and the newest hydrations, which Expand and
ReportOutcome refer to. Their tables are made on open like the others (`CREATE TABLE IF NOT EXISTS`), so a
database of an earlier schema gains them as it is opened; no table of it changes.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import Counts, SkillVersion, StoredHydration

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
GRAPH_RECORDS = (
    f"SELECT r.name, r.version, r.record FROM skill_graph_records AS r JOIN ({CURRENT_VERSIONS}) AS c "
    "ON r.name = c.name AND r.version = c.version WHERE r.tag = {tag}"
)
"""The graph records of current versions under one tag (`{tag}`: the backend's placeholder)."""
GRAPH_RECORD = "SELECT record FROM skill_graph_records WHERE tag = {} AND name = {} AND version = {}"
"""One version's graph record under one tag (the placeholders: tag, name, version)."""
FORGET_GRAPH_RECORDS = (
    f"DELETE FROM skill_graph_records WHERE (name, version) NOT IN ({CURRENT_VERSIONS})",
    "DELETE FROM skill_graph_records WHERE tag <> {tag} AND tag NOT IN (SELECT tag FROM skill_graph_records "
    "WHERE tag <> {tag} GROUP BY tag ORDER BY MAX(saved) DESC, tag DESC LIMIT 1)",
)
"""`SkillStore.forget_graph_records`: the records of versions no longer current, then those of every tag but
the given one (`{tag}`) and the other saved last."""


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
        """The newest version of every name whose newest version is not removed, by name in code point order
        (as Python sorts them, whatever a database collates: a registry start files MotifZip's runs in this
        order, and sorts every bucket when done if the skills came in any other)."""

    async def current_versions(self) -> dict[str, int]:
        """{name: version} of `current()`, without reading files."""
        return {version.name: version.version for version in await self.current()}

    @abc.abstractmethod
    async def get(self, name: str, version: int) -> SkillVersion | None: ...

    @abc.abstractmethod
    async def newest_version(self, name: str) -> int:
        """The highest version ever stored under the name (removed or not); 0 if none."""

    @abc.abstractmethod
    async def graph_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        """{(name, version): record} of the current versions' graph records made under `tag`."""

    @abc.abstractmethod
    async def graph_record(self, tag: str, name: str, version: int) -> bytes | None:
        """The graph record of one version made under `tag`, if kept (as another server sharing the store
        made it when it registered that version)."""

    @abc.abstractmethod
    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        """Keep these (name, version, record) under `tag`, replacing any of the same version and tag; each save
        is numbered after every earlier one."""

    @abc.abstractmethod
    async def forget_graph_records(self, tag: str) -> None:
        """Forget the records of versions no longer current, and those made under any tag but `tag` and the
        other one saved last: servers of two versions sharing a store (a rolling upgrade) keep each other's."""

    @abc.abstractmethod
    async def macro_revisions(self) -> dict[str, int | None]:
        """What execution evidence decided about macros: {macro key (JSON): default level, or None if split}."""

    @abc.abstractmethod
    async def save_macro_revision(self, key_json: str, level: int | None) -> None: ...

    @abc.abstractmethod
    async def macro_evidence(self) -> dict[str, Counts]:
        """The evidence counted per macro key (JSON) since it was last revised."""

    @abc.abstractmethod
    async def save_evidence(
        self,
        evidence: Mapping[str, Counts | None],
        levels: Mapping[str, int | None] | None = None,
        reported: str | None = None,
    ) -> None:
        """In one transaction: set each key's evidence (None deletes it), store the levels evidence decided
        (as `save_macro_revision`), and forget the hydration `reported` (one report per hydration)."""

    @abc.abstractmethod
    async def keep_hydration(self, hydration: StoredHydration, keep: int) -> None:
        """Keep a hydration as the newest (one of the same id is replaced, its expansions forgotten), then
        forget all but the newest `keep`."""

    @abc.abstractmethod
    async def add_expansion(self, hydration_id: str, macro_id: str) -> None:
        """Record that a macro of a kept hydration was expanded (once; nothing if the hydration is not kept)."""

    @abc.abstractmethod
    async def kept_hydration(self, hydration_id: str) -> StoredHydration | None: ...
