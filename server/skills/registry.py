"""The skill registry: registered versions in a SkillStore, the current ones in a published Snapshot.

A snapshot (the current skills, their library and their macros) never changes once published. Readers
(hydrations, Expand, GetSkill, ListSkills, library stats) take the one current when they start and work
over it to the end, the heavy part in a worker thread: they never wait for a writer, and never see part of
one. Writers (registrations, removals, outcome reports, looks at a shared store) take turns, each building
and publishing the next snapshot (publisher.py). A version is stored before a snapshot serves it: a
restart serves exactly what was acknowledged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ..errors import DuplicateRowError, InvalidArgumentError, NotFoundError
from ..storage.records import SkillVersion, StoredHydration
from ..storage.skill_store.base import SkillStore
from . import records
from .bulk import fewer_collections, settle_long_lived
from .compressed import LibraryStats, library_stats
from .graph import Extractor
from .hydrate import Hydration, hydrate
from .kept import KeptHydration
from .library import SkillLibrary, node_tokens
from .macros import Compression, Level
from .package import PackageLimits
from .publisher import SnapshotPublisher
from .render import render_macro
from .snapshot import Registration, Revision, SkillView

MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_BUDGET = 100_000
MAX_QUERY_CHARS = 4096
MAX_REQUESTER_CHARS = 128
KEPT_HYDRATIONS = 1024
"""Recent hydrations kept for Expand and ReportOutcome, in memory and in the store (a restart keeps them)."""


class SkillRegistry(SnapshotPublisher):
    def __init__(
        self,
        store: SkillStore,
        limits: PackageLimits = PackageLimits(),
        extractor: Extractor | None = None,
        worker: concurrent.futures.Executor | None = None,
        writer: concurrent.futures.Executor | None = None,
    ) -> None:
        """The registry of the skills in `store` (on `worker` and `writer`: see `SnapshotPublisher`)."""
        super().__init__(store, limits, extractor, worker, writer)
        self._stats: tuple[int, LibraryStats, Compression] | None = None
        self._measuring = asyncio.Lock()
        self._hydrations: OrderedDict[str, tuple[KeptHydration, set[str], SkillLibrary | None]] = OrderedDict()
        """hydration id -> (what is kept of it, the macros expanded from it, the library it was hydrated over
        if this server made it): the newest KEPT_HYDRATIONS, as the store keeps them (`_kept` reads one of
        those from the store after a restart, or one another server made)"""

    def hydrated_sections(self, hydration: Hydration) -> list[tuple[str, int, str, str]]:
        """(skill, index, title, role) of a hydration's sections, from the library it was hydrated over
        (whatever a writer published since), which is kept as long as the hydration is."""
        kept = self._hydrations.get(hydration.hydration_id)
        library = kept[2] if kept is not None and kept[2] is not None else self._snapshot.library
        sections = []
        for name, index in hydration.sections:
            skill = library.get(name)
            if skill is None:
                raise NotFoundError(f"hydration_id: skill {name!r} left the library; hydrate again")
            node = skill.graph.nodes[index]
            sections.append((name, index, node.title, node.role.value))
        return sections

    async def register(self, files: Mapping[str, bytes], folder: str = "", strict: bool = False) -> Registration:
        """Load, store and serve a package; raises SkillFormatError (INVALID_ARGUMENT) listing its errors."""
        await self.ready()
        package, graph = await self._off_loop(self._load, dict(files), folder, strict)
        digest = package.digest
        async with self._turn() as snapshot:
            current = snapshot.views.get(package.name)
            if current is not None and current.stored.digest == digest:
                return Registration(
                    package.name, current.stored.version, len(graph.nodes), package.warnings, True, digest
                )
            number = await self._store.newest_version(package.name) + 1
            stored = SkillVersion(package.name, number, digest, package.folder, time.time(), package.files)
            try:
                await self._store.add(stored)
            except DuplicateRowError as e:  # another server wrote this version: ours must not overwrite it
                raise InvalidArgumentError(f"skill {package.name!r}: {e}") from e
            await self._change(lambda draft: draft.serve(stored, package, graph))
        if self._record_tag is not None and not strict:  # (a start loads leniently: it reads what lenient made)
            record = await self._off_loop(records.encode, package, graph)
            await self._keep_records(self._record_tag, [(package.name, number, record)])
        return Registration(package.name, number, len(graph.nodes), package.warnings, False, digest)

    async def remove(self, name: str) -> int:
        """Take a skill out of the library; returns the version that was current."""
        await self.ready()
        async with self._turn() as snapshot:
            current = snapshot.views.get(name)
            if current is None:
                raise NotFoundError(f"name: no skill {name!r} in the library")
            await self._store.mark_removed(name, current.stored.version, time.time())
            await self._change(lambda draft: draft.forget(name))
            return current.stored.version

    async def page(self, page_size: int = 0, after: str = "") -> tuple[list[SkillView], bool]:
        """Current skills named after `after`, by name, a page at a time; and whether more follow."""
        await self.ready()
        size = DEFAULT_PAGE if page_size == 0 else page_size
        if not 1 <= size <= MAX_PAGE:
            raise InvalidArgumentError(f"page_size: must be 0-{MAX_PAGE}, got {page_size}")
        views = self._snapshot.views
        names = sorted(name for name in views if name > after)
        return [views[name] for name in names[:size]], len(names) > size

    async def get(self, name: str, version: int = 0) -> SkillView:
        """The current version (version 0) or an earlier one, removed or not."""
        await self.ready()
        if version < 0:
            raise InvalidArgumentError(f"version: must be >= 0, got {version}")
        current = self._snapshot.views.get(name)
        if current is not None and version in (0, current.stored.version):
            return current
        stored = await self._store.get(name, version) if version else None
        if stored is None:
            what = f"version {version} of skill {name!r}" if version else f"skill {name!r}"
            raise NotFoundError(f"name: no {what} in the library")
        package, graph = await self._off_loop(self._load, stored.files, stored.folder, False)
        return SkillView(stored, package, graph, node_tokens(graph))

    async def hydrate(self, query: str, budget: int, skill_names: Iterable[str] = (), requester: str = "") -> Hydration:
        """A context for the query; `requester` (an agent's id) gives its own hydration to each requester of one
        context, to report on once."""
        await self.ready()
        if not query.strip():
            raise InvalidArgumentError("query: must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgumentError(f"query: {len(query)} characters, more than {MAX_QUERY_CHARS}")
        if not 1 <= budget <= MAX_BUDGET:
            raise InvalidArgumentError(f"budget_tokens: must be 1-{MAX_BUDGET}, got {budget}")
        if len(requester) > MAX_REQUESTER_CHARS or not requester.isprintable():
            raise InvalidArgumentError(
                f"requester: at most {MAX_REQUESTER_CHARS} characters and no control characters, got {requester!r:.200}"
            )
        names = list(skill_names)
        snapshot = self._snapshot  # the library as it is now, to the end, whatever writers publish meanwhile
        missing = sorted(set(names) - snapshot.views.keys())
        if missing:
            raise NotFoundError(f"skill_names: not in the library: {', '.join(missing)}")
        hydration = await self._off_loop(hydrate, snapshot.library, query, budget, names, snapshot.macros, requester)
        kept = KeptHydration.of(hydration, snapshot.library)
        await self._store.keep_hydration(StoredHydration(kept.hydration_id, kept.to_json()), KEPT_HYDRATIONS)
        self._remember(kept, set(), snapshot.library)
        return hydration

    async def expand(self, hydration_id: str, macro_id: str, level: Level = Level.FULL) -> str:
        """One macro of a recent hydration at `level` (its occurrence's exact text at FULL), from the library
        as it is now: NOT_FOUND naming `hydration_id` if the macro's skill changed version since."""
        await self.ready()
        kept, expanded = await self._kept(hydration_id)
        shown = kept.macro(macro_id)
        library = self._snapshot.library
        kept.check_current(shown.occurrence.skill, library)
        text = render_macro(library.graph(shown.occurrence.skill), shown.block(level))
        if macro_id not in expanded:
            await self._store.add_expansion(hydration_id, macro_id)
            expanded.add(macro_id)
        return text

    async def report_outcome(self, hydration_id: str, success: bool, failed_macro_ids: Iterable[str]) -> list[Revision]:
        """Record the evidence of one execution for every macro key its context showed (a use, whether one of
        its macros was expanded, whether its verifier failed); returns the revisions of the hydration's macros.
        The counts, what they decided and the end of the hydration (one report each) are stored together, in
        the writer's turn, before the next snapshot is published: a restart goes on from them."""
        await self.ready()
        async with self._turn():
            kept, expanded = await self._kept(hydration_id, fresh=self._store.shared)
            shown = {m.macro_id for m in kept.macros}
            failed = set(failed_macro_ids)
            unknown = sorted(failed - shown)
            if unknown:
                raise InvalidArgumentError(f"failed_macro_ids: not macros of this hydration: {', '.join(unknown)}")
            library = self._snapshot.library
            for skill in sorted({m.occurrence.skill for m in kept.macros}):
                kept.check_current(skill, library)
            by_key, expanded_keys, failed_keys = kept.by_key(), kept.keys_of(expanded), kept.keys_of(failed)
            snapshot, (revisions, levels), changes = await self._build(
                lambda draft: draft.report(by_key, expanded_keys, failed_keys)
            )
            await self._store.save_evidence(changes, dict(levels), reported=hydration_id)
            self._hydrations.pop(hydration_id, None)
            self._publish(snapshot)
        return revisions

    async def _kept(self, hydration_id: str, fresh: bool = False) -> tuple[KeptHydration, set[str]]:
        """A kept hydration and the macros expanded from it: from memory, else (after a restart, or made by
        another server on a shared store) from the store; `fresh` reads the store regardless (with a shared
        store another server may have reported it or expanded its macros)."""
        held = self._hydrations.get(hydration_id)
        if held is not None and not fresh:
            self._hydrations.move_to_end(hydration_id)
            return held[0], held[1]
        stored = await self._store.kept_hydration(hydration_id)
        if stored is None:
            self._hydrations.pop(hydration_id, None)
            raise NotFoundError(f"hydration_id: {hydration_id!r} is unknown or expired; hydrate again")
        if held is not None:
            held[1].update(stored.expanded)
            return held[0], held[1]
        kept = KeptHydration.from_json(hydration_id, stored.record_json)
        expanded = set(stored.expanded)
        self._remember(kept, expanded, None)
        return kept, expanded

    def _remember(self, kept: KeptHydration, expanded: set[str], library: SkillLibrary | None) -> None:
        self._hydrations[kept.hydration_id] = (kept, expanded, library)
        self._hydrations.move_to_end(kept.hydration_id)
        while len(self._hydrations) > KEPT_HYDRATIONS:
            self._hydrations.popitem(last=False)

    async def stats(self) -> tuple[LibraryStats, Compression]:
        """The library's size and compression, measured in a worker thread and cached until it changes."""
        await self.ready()
        async with self._measuring:
            snapshot = self._snapshot
            if self._stats is None or self._stats[0] != snapshot.generation:
                graphs = [view.graph for view in snapshot.views.values()]
                # fewer collections: a full one of the millions of objects this builds holds the GIL
                with fewer_collections():
                    compression = await self._off_loop(snapshot.macros.compression)
                    stats = await self._off_loop(library_stats, compression, graphs)
                self._stats = (snapshot.generation, stats, compression)
                settle_long_lived()  # kept until the library changes: out of the full collections meanwhile
            return self._stats[1], self._stats[2]
