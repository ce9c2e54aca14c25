"""Skill versions in memory: for tests and servers whose log is in memory."""

from __future__ import annotations

from dataclasses import replace

from ...errors import DuplicateRowError
from ..records import SkillVersion
from .base import SkillStore


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
