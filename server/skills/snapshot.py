"""What the registry publishes and how a writer builds the next version: a Snapshot of the library that never
changes once published, and the Draft a writer changes in place, over forks of the current indexes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..storage.records import Counts, SkillVersion
from .diagnostics import Diagnostic
from .graph import SkillGraph
from .library import SkillLibrary, node_words
from .macro_index import MacroIndex, Rebuild
from .macros import Key, Level, key_to_json
from .package import SkillPackage


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
        self, stored: SkillVersion, package: SkillPackage, graph: SkillGraph, rebuild: Rebuild | None = None
    ) -> None:
        """Serve a skill: its macros maintained now (ReZip), or by the full MotifZip `rebuild` under way."""
        words = node_words(graph)  # read by the library's indexes and by MotifZip
        skill = self.library.add(graph, stored.version, words)
        self._views()[package.name] = SkillView(stored, package, graph, skill.node_tokens)
        if rebuild is None:
            self.macros.add(graph, skill.node_tokens, words)  # seconds for a large library
        else:
            rebuild.add(graph, skill.node_tokens, words)
        self.generation += 1

    def forget(self, name: str) -> None:
        del self._views()[name]
        self.library.remove(name)
        self.macros.remove(name)
        self.generation += 1

    def report(
        self, shown: Mapping[Key, Sequence[str]], expanded: set[Key], failed: set[Key]
    ) -> tuple[list[Revision], list[tuple[str, int | None]]]:
        """Record one execution's evidence for the macro keys its context showed (`shown`: each key's macro
        ids there); returns the revisions of those macros and the (key, level) pairs to store."""
        revisions, levels = [], []
        for key in sorted(shown):
            if self.macros.report_key(key, expanded=key in expanded, verifier_failed=key in failed):
                level = self.macros.revised[key]
                revisions += [Revision(macro_id, level) for macro_id in shown[key]]
                levels.append((key_to_json(key), int(level) if level else None))
        if revisions:
            self.generation += 1
        return revisions, levels

    def evidence_changes(self, base: Snapshot) -> dict[str, Counts | None]:
        """What the evidence counted changed since `base`, by key (JSON): each changed key's counts, or None
        for a key whose evidence is gone (revised, or its macros retired). What a store is given to keep."""
        before, after = base.macros.evidence, self.macros.evidence
        if before is after:
            return {}
        changes: dict[str, Counts | None] = {
            key_to_json(key): (e.uses, e.expansions, e.verifier_failures)
            for key, e in after.items()
            if before.get(key) != e
        }
        changes.update((key_to_json(key), None) for key in before.keys() - after.keys())
        return changes

    def snapshot(self) -> Snapshot:
        """The draft as a snapshot, its indexes settled so that reading them writes nothing."""
        self.library.settle()
        views = self._base_views if self.views is None else self.views
        return Snapshot(views, self.library, self.macros, self.generation)

    def _views(self) -> dict[str, SkillView]:
        if self.views is None:
            self.views = dict(self._base_views)
        return self.views
