"""Skill versions in memory: for tests and servers whose log is in memory."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ...errors import DuplicateRowError
from ..records import Counts, SkillVersion, StoredHydration
from .base import SkillStore


class MemorySkillStore(SkillStore):
    def __init__(self) -> None:
        self._versions: dict[tuple[str, int], SkillVersion] = {}
        self._revisions: dict[str, int | None] = {}
        self._evidence: dict[str, Counts] = {}
        self._hydrations: OrderedDict[str, StoredHydration] = OrderedDict()
        self._records: dict[tuple[str, int, str], tuple[int, bytes]] = {}
        """(name, version, tag) -> (the save's number, graph record)"""

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

    async def graph_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        current = {(v.name, v.version) for v in await self.current()}
        return {(n, v): record for (n, v, t), (_, record) in self._records.items() if t == tag and (n, v) in current}

    async def graph_record(self, tag: str, name: str, version: int) -> bytes | None:
        kept = self._records.get((name, version, tag))
        return None if kept is None else kept[1]

    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        number = max((saved for saved, _ in self._records.values()), default=0) + 1
        self._records.update(((name, version, tag), (number, record)) for name, version, record in records)

    async def forget_graph_records(self, tag: str) -> None:
        current = {(v.name, v.version) for v in await self.current()}
        last: dict[str, int] = {}
        for (_, _, t), (saved, _) in self._records.items():
            last[t] = max(last.get(t, 0), saved)
        others = sorted((t for t in last if t != tag), key=lambda t: (last[t], t))
        kept_tags = {tag, *others[-1:]}
        self._records = {
            (n, v, t): kept for (n, v, t), kept in self._records.items() if t in kept_tags and (n, v) in current
        }

    async def macro_revisions(self) -> dict[str, int | None]:
        return dict(self._revisions)

    async def save_macro_revision(self, key_json: str, level: int | None) -> None:
        self._revisions[key_json] = level

    async def macro_evidence(self) -> dict[str, Counts]:
        return dict(self._evidence)

    async def save_evidence(
        self,
        evidence: Mapping[str, Counts | None],
        levels: Mapping[str, int | None] | None = None,
        reported: str | None = None,
    ) -> None:
        for key, counts in evidence.items():
            if counts is None:
                self._evidence.pop(key, None)
            else:
                self._evidence[key] = counts
        self._revisions.update(levels or {})
        if reported is not None:
            self._hydrations.pop(reported, None)

    async def keep_hydration(self, hydration: StoredHydration, keep: int) -> None:
        self._hydrations.pop(hydration.hydration_id, None)
        self._hydrations[hydration.hydration_id] = replace(hydration, expanded=frozenset())
        while len(self._hydrations) > keep:
            self._hydrations.popitem(last=False)

    async def add_expansion(self, hydration_id: str, macro_id: str) -> None:
        kept = self._hydrations.get(hydration_id)
        if kept is not None:
            self._hydrations[hydration_id] = replace(kept, expanded=kept.expanded | {macro_id})

    async def kept_hydration(self, hydration_id: str) -> StoredHydration | None:
        return self._hydrations.get(hydration_id)
