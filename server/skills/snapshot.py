"""What the registry publishes and how a writer builds the next version: a Snapshot of the library that never
changes once published, and the Draft a writer changes in place, over forks of the current indexes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..storage.records import SkillVersion
from .graph import SkillGraph
from .library import SkillLibrary
from .macro_index import MacroIndex
from .macros import Level, key_to_json
from .package import Diagnostic, SkillPackage


@dataclass(frozen=True)
class Revision:
    macro_id: str
    level: Level | None
    """Its default level now; None when it was split or retired."""


@dataclass(frozen=True)
class Registration:
    name: str
    version: int
    section_count: int
    warnings: tuple[Diagnostic, ...]
    unchanged: bool
    digest: str


@dataclass(frozen=True)
class SkillView:
    """One version of a skill: what was stored, what loading found, and its graph."""

    stored: SkillVersion
    package: SkillPackage
    graph: SkillGraph
    node_tokens: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    """One version of the library, never changed once published: what a reader works over."""

    views: Mapping[str, SkillView]
    """The current skills by name."""
    library: SkillLibrary
    macros: MacroIndex
    generation: int
    """Counts changes to the skills and macros; cached results name the generation they were computed for."""


class Draft:
    """The next snapshot as one writer builds it: forks of the current one's indexes, changed in place.
    `snapshot()` ends it: the draft's tables are then the published ones and must not change again."""

    def __init__(self, base: Snapshot) -> None:
        self._base_views = base.views
        self.views: dict[str, SkillView] | None = None
        self.library = base.library.fork()
        self.macros = base.macros.fork()
        self.generation = base.generation

    def serve(
        self, stored: SkillVersion, package: SkillPackage, graph: SkillGraph, maintain_macros: bool = True
    ) -> None:
        skill = self.library.add(graph, stored.version)
        self._views()[package.name] = SkillView(stored, package, graph, skill.node_tokens)
        if maintain_macros:
            self.macros.add(graph, skill.node_tokens)  # seconds for a large library
        self.generation += 1

    def forget(self, name: str) -> None:
        del self._views()[name]
        self.library.remove(name)
        self.macros.remove(name)
        self.generation += 1

    def report(
        self, shown: set[str], expanded: set[str], failed: set[str]
    ) -> tuple[list[Revision], list[tuple[str, int | None]]]:
        """Record one execution's evidence; returns the revisions and the (key, level) pairs to store."""
        revisions, levels = [], []
        for macro_id in sorted(shown):
            before = self.macros.macro(macro_id)
            self.macros.report(macro_id, expanded=macro_id in expanded, verifier_failed=macro_id in failed)
            after = self.macros.macro(macro_id)
            if before is not None and (after is None or after.default_level != before.default_level):
                revisions.append(Revision(macro_id, after.default_level if after else None))
                level = self.macros.revised[before.key]
                levels.append((key_to_json(before.key), int(level) if level else None))
        if revisions:
            self.generation += 1
        return revisions, levels

    def snapshot(self) -> Snapshot:
        """The draft as a snapshot, its indexes settled so that reading them writes nothing."""
        self.library.settle()
        views = self._base_views if self.views is None else self.views
        return Snapshot(views, self.library, self.macros, self.generation)

    def _views(self) -> dict[str, SkillView]:
        if self.views is None:
            self.views = dict(self._base_views)
        return self.views
