"""The skill registry: registered versions in a SkillStore, the current ones in a SkillLibrary.

Loading a package and building its graph run in a worker thread, so a large package does not stall the
event loop the state server shares; the library itself is only touched on the loop. Registrations and
removals are serialized, and a version is stored before the library serves it: a restart serves exactly
what was acknowledged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import DuplicateRowError, InvalidArgumentError, NotFoundError, StorageError
from ..storage.records import SkillVersion
from ..storage.skill_store.base import SkillStore
from .bulk import fewer_collections, settle_long_lived
from .compressed import LibraryStats, library_stats
from .graph import Extractor, SkillGraph, build_graph
from .hydrate import Hydration, hydrate
from .library import SkillLibrary, node_tokens
from .macro_index import MacroIndex
from .macros import Compression, Level, key_from_json, key_to_json
from .package import Diagnostic, PackageLimits, SkillPackage, load_package
from .readwrite import ReadWriteLock
from .render import MacroBlock, render_macro

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_BUDGET = 100_000
MAX_QUERY_CHARS = 4096
KEPT_HYDRATIONS = 1024
"""Recent hydrations kept for Expand and ReportOutcome (in memory: a restart forgets them)."""


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


SYNC_INTERVAL = 1.0
"""Seconds between looks at a shared store for skills other servers registered or removed."""


class SkillRegistry:
    def __init__(
        self,
        store: SkillStore,
        limits: PackageLimits = PackageLimits(),
        extractor: Extractor | None = None,
        worker: concurrent.futures.Executor | None = None,
    ) -> None:
        """`worker` runs what would hold the event loop (loading packages, maintaining macros, hydrating);
        by default asyncio's default executor."""
        self._store = store
        self._worker = worker
        self._limits = limits
        self._extractor = extractor
        """Sec2Graph's role and contract extraction when not the deterministic rules (llm_extract.py)."""
        self.library = SkillLibrary()
        self._current: dict[str, SkillView] = {}
        self._access = ReadWriteLock()
        """Readers (hydrations, in worker threads) or one writer (a registration, removal or report)."""
        self._generation = 0
        """Counts changes to the library; cached results name the generation they were computed for."""
        self.macros = MacroIndex()
        """The library's macros: compressed in full at start, then maintained skill by skill (ReZip)."""
        self._stats: tuple[int, LibraryStats, Compression] | None = None
        self._measuring = asyncio.Lock()
        self._hydrations: OrderedDict[str, tuple[Hydration, set[str]]] = OrderedDict()
        """hydration id -> (the hydration, the macros expanded from it)"""
        self._loading: asyncio.Task[None] | None = None
        self._synced_at = -float("inf")

    async def start(self) -> None:
        """Open the store and start rebuilding the library in the background: the server it shares serves
        at once, and calls to the registry wait in `ready()` until the library is whole."""
        await self._store.open()
        self._loading = asyncio.create_task(self._rebuild(), name="skillstate-skill-library")

    async def ready(self) -> None:
        """Wait until the library holds every stored skill (raises what rebuilding it raised). Every public
        call waits here first."""
        if self._loading is None:
            raise StorageError("the skill registry was not started")
        await asyncio.shield(self._loading)
        if self._store.shared and time.monotonic() - self._synced_at > SYNC_INTERVAL:
            await self._sync()

    async def _sync(self) -> None:
        """Serve what other servers registered or removed in a shared store since this one last looked."""
        async with self._access.write():
            self._synced_at = time.monotonic()
            stored = await self._store.current_versions()
            for name in [name for name in self._current if name not in stored]:
                await self._off_loop(self._forget, name)
            for name, number in sorted(stored.items()):
                current = self._current.get(name)
                if current is not None and current.stored.version == number:
                    continue
                version = await self._store.get(name, number)
                if version is not None:
                    package, graph = await self._off_loop(self._load, version.files, version.folder, False)
                    if current is not None:
                        await self._off_loop(self._forget, name)
                    await self._off_loop(self._serve, version, package, graph)

    async def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loading
        await self._store.close()

    async def _rebuild(self) -> None:
        self.macros.revised = {
            key_from_json(key): Level(level) if level else None
            for key, level in (await self._store.macro_revisions()).items()
        }
        with fewer_collections():
            for stored in await self._store.current():
                package, graph = await self._off_loop(self._load, stored.files, stored.folder, False)
                self._serve(stored, package, graph, maintain_macros=False)
        graphs = [view.graph for view in self._current.values()]
        tokens = {view.graph.skill: view.node_tokens for view in self._current.values()}
        await self._off_loop(self.macros.rebuild, graphs, tokens)
        settle_long_lived()
        log.info("skill library ready: %d skills, %d macros", len(self._current), len(self.macros.compression().macros))

    async def register(self, files: Mapping[str, bytes], folder: str = "", strict: bool = False) -> Registration:
        """Load, store and serve a package; raises SkillFormatError (INVALID_ARGUMENT) listing its errors."""
        await self.ready()
        package, graph = await self._off_loop(self._load, dict(files), folder, strict)
        digest = package.digest
        async with self._access.write():
            current = self._current.get(package.name)
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
            await self._off_loop(self._serve, stored, package, graph)  # seconds for a large library
            settle_long_lived()
        return Registration(package.name, number, len(graph.nodes), package.warnings, False, digest)

    async def remove(self, name: str) -> int:
        """Take a skill out of the library; returns the version that was current."""
        await self.ready()
        async with self._access.write():
            current = self._current.get(name)
            if current is None:
                raise NotFoundError(f"name: no skill {name!r} in the library")
            await self._store.mark_removed(name, current.stored.version, time.time())
            await self._off_loop(self._forget, name)
            return current.stored.version

    def _forget(self, name: str) -> None:
        del self._current[name]
        self.library.remove(name)
        self.macros.remove(name)
        self._generation += 1

    async def page(self, page_size: int = 0, after: str = "") -> tuple[list[SkillView], bool]:
        """Current skills named after `after`, by name, a page at a time; and whether more follow."""
        await self.ready()
        size = DEFAULT_PAGE if page_size == 0 else page_size
        if not 1 <= size <= MAX_PAGE:
            raise InvalidArgumentError(f"page_size: must be 0-{MAX_PAGE}, got {page_size}")
        async with self._access.read():
            names = sorted(name for name in self._current if name > after)
            page = [self._current[name] for name in names[:size]]
        return page, len(names) > size

    async def get(self, name: str, version: int = 0) -> SkillView:
        """The current version (version 0) or an earlier one, removed or not."""
        await self.ready()
        if version < 0:
            raise InvalidArgumentError(f"version: must be >= 0, got {version}")
        async with self._access.read():
            current = self._current.get(name)
        if current is not None and version in (0, current.stored.version):
            return current
        stored = await self._store.get(name, version) if version else None
        if stored is None:
            what = f"version {version} of skill {name!r}" if version else f"skill {name!r}"
            raise NotFoundError(f"name: no {what} in the library")
        package, graph = await self._off_loop(self._load, stored.files, stored.folder, False)
        return SkillView(stored, package, graph, node_tokens(graph))

    async def hydrate(self, query: str, budget: int, skill_names: Iterable[str] = ()) -> Hydration:
        await self.ready()
        if not query.strip():
            raise InvalidArgumentError("query: must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgumentError(f"query: {len(query)} characters, more than {MAX_QUERY_CHARS}")
        if not 1 <= budget <= MAX_BUDGET:
            raise InvalidArgumentError(f"budget_tokens: must be 1-{MAX_BUDGET}, got {budget}")
        names = list(skill_names)
        async with self._access.read():  # the library as one registration left it, unchanged until the end
            missing = sorted(set(names) - self._current.keys())
            if missing:
                raise NotFoundError(f"skill_names: not in the library: {', '.join(missing)}")
            hydration = await self._off_loop(hydrate, self.library, query, budget, names, self.macros)
        self._hydrations[hydration.hydration_id] = (hydration, set())
        self._hydrations.move_to_end(hydration.hydration_id)
        while len(self._hydrations) > KEPT_HYDRATIONS:
            self._hydrations.popitem(last=False)
        return hydration

    async def expand(self, hydration_id: str, macro_id: str, level: Level = Level.FULL) -> str:
        """One macro of a recent hydration at `level` (its occurrence's exact text at FULL)."""
        await self.ready()
        hydration, expanded = self._hydration(hydration_id)
        block = next((b for b in hydration.macros if b.macro.macro_id == macro_id), None)
        if block is None:
            raise NotFoundError(f"macro_id: {macro_id!r} is not a macro of hydration {hydration_id}")
        async with self._access.read():
            graph = self.library.graph(block.occurrence.skill) if block.occurrence.skill in self.library else None
        if graph is None:
            raise NotFoundError(f"hydration_id: skill {block.occurrence.skill!r} left the library; hydrate again")
        expanded.add(macro_id)
        return render_macro(graph, MacroBlock(block.macro, block.occurrence, level))

    async def report_outcome(self, hydration_id: str, success: bool, failed_macro_ids: Iterable[str]) -> list[Revision]:
        """Record the evidence of one execution for every macro its context showed; returns the revisions,
        which are stored (a restart keeps raised levels and splits)."""
        await self.ready()
        async with self._access.write():
            hydration, expanded = self._hydration(hydration_id)
            shown = {b.macro.macro_id for b in hydration.macros}
            failed = set(failed_macro_ids)
            unknown = sorted(failed - shown)
            if unknown:
                raise InvalidArgumentError(f"failed_macro_ids: not macros of this hydration: {', '.join(unknown)}")
            revisions = await self._report(shown, expanded, failed)
            del self._hydrations[hydration_id]  # one report per hydration
        if revisions:
            self._generation += 1
        return revisions

    async def _report(self, shown: set[str], expanded: set[str], failed: set[str]) -> list[Revision]:
        revisions = []
        for macro_id in sorted(shown):
            before = self.macros.macro(macro_id)
            self.macros.report(macro_id, expanded=macro_id in expanded, verifier_failed=macro_id in failed)
            after = self.macros.macro(macro_id)
            if before is not None and (after is None or after.default_level != before.default_level):
                revisions.append(Revision(macro_id, after.default_level if after else None))
                level = self.macros.revised[before.key]
                await self._store.save_macro_revision(key_to_json(before.key), int(level) if level else None)
        return revisions

    def _hydration(self, hydration_id: str) -> tuple[Hydration, set[str]]:
        kept = self._hydrations.get(hydration_id)
        if kept is None:
            raise NotFoundError(f"hydration_id: {hydration_id!r} is unknown or expired; hydrate again")
        return kept

    async def stats(self) -> tuple[LibraryStats, Compression]:
        """The library's size and compression, measured in a worker thread and cached until it changes."""
        await self.ready()
        async with self._measuring:
            if self._stats is None or self._stats[0] != self._generation:
                # fewer collections: a full one of the millions of objects this builds holds the GIL
                async with self._access.read():
                    generation = self._generation
                    graphs = [view.graph for view in self._current.values()]
                    with fewer_collections():
                        compression = await self._off_loop(self.macros.compression)
                        stats = await self._off_loop(library_stats, compression, graphs)
                self._stats = (generation, stats, compression)
                settle_long_lived()  # kept until the library changes: out of the full collections meanwhile
            return self._stats[1], self._stats[2]

    async def _off_loop(self, work: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._worker, functools.partial(work, *args))

    def _load(self, files: Mapping[str, bytes], folder: str, strict: bool) -> tuple[SkillPackage, SkillGraph]:
        package = load_package(files, folder, strict=strict, limits=self._limits)
        return package, build_graph(package, self._extractor)

    def _serve(
        self, stored: SkillVersion, package: SkillPackage, graph: SkillGraph, maintain_macros: bool = True
    ) -> None:
        skill = self.library.add(graph, stored.version)
        self._current[package.name] = SkillView(stored, package, graph, skill.node_tokens)
        if maintain_macros:
            self.macros.add(graph, skill.node_tokens)
        self._generation += 1
