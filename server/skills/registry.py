"""The skill registry: registered versions in a SkillStore, the current ones in a SkillLibrary.

Loading a package and building its graph run in a worker thread, so a large package does not stall the
event loop the state server shares; the library itself is only touched on the loop. Registrations and
removals are serialized, and a version is stored before the library serves it: a restart serves exactly
what was acknowledged.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

from ..errors import DuplicateRowError, InvalidArgumentError, NotFoundError
from .compressed import LibraryStats, library_stats
from .graph import SkillGraph, build_graph
from .hydrate import Hydration, hydrate
from .library import SkillLibrary, node_tokens
from .motifs import Compression, MacroIndex
from .package import Diagnostic, PackageLimits, SkillPackage, load_package
from .store import SkillStore, SkillVersion

MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_BUDGET = 100_000
MAX_QUERY_CHARS = 4096


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


class SkillRegistry:
    def __init__(self, store: SkillStore, limits: PackageLimits = PackageLimits()) -> None:
        self._store = store
        self._limits = limits
        self.library = SkillLibrary()
        self._current: dict[str, SkillView] = {}
        self._writing = asyncio.Lock()
        self._generation = 0
        """Counts changes to the library; cached results name the generation they were computed for."""
        self.macros = MacroIndex()
        """The library's macros: compressed in full at start, then maintained skill by skill (ReZip)."""
        self._stats: tuple[int, LibraryStats, Compression] | None = None
        self._measuring = asyncio.Lock()

    async def start(self) -> None:
        """Open the store and rebuild the library from every current version."""
        await self._store.open()
        for stored in await self._store.current():
            package, graph = await asyncio.to_thread(_load, stored.files, stored.folder, False, self._limits)
            self._serve(stored, package, graph, maintain_macros=False)
        graphs = [view.graph for view in self._current.values()]
        tokens = {view.graph.skill: view.node_tokens for view in self._current.values()}
        await asyncio.to_thread(self.macros.rebuild, graphs, tokens)

    async def close(self) -> None:
        await self._store.close()

    async def register(self, files: Mapping[str, bytes], folder: str = "", strict: bool = False) -> Registration:
        """Load, store and serve a package; raises SkillFormatError (INVALID_ARGUMENT) listing its errors."""
        package, graph = await asyncio.to_thread(_load, dict(files), folder, strict, self._limits)
        digest = package.digest
        async with self._writing:
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
            self._serve(stored, package, graph)
        return Registration(package.name, number, len(graph.nodes), package.warnings, False, digest)

    async def remove(self, name: str) -> int:
        """Take a skill out of the library; returns the version that was current."""
        async with self._writing:
            current = self._current.get(name)
            if current is None:
                raise NotFoundError(f"name: no skill {name!r} in the library")
            await self._store.mark_removed(name, current.stored.version, time.time())
            del self._current[name]
            self.library.remove(name)
            self.macros.remove(name)
            self._generation += 1
            return current.stored.version

    def list(self, page_size: int = 0, page_token: str = "") -> tuple[list[SkillView], str]:
        """Current skills by name, a page at a time; the token is opaque to callers."""
        size = DEFAULT_PAGE if page_size == 0 else page_size
        if not 1 <= size <= MAX_PAGE:
            raise InvalidArgumentError(f"page_size: must be 0-{MAX_PAGE}, got {page_size}")
        after = _decode_page_token(page_token)
        names = sorted(name for name in self._current if name > after)
        page = [self._current[name] for name in names[:size]]
        token = _encode_page_token(page[-1].stored.name) if len(names) > size else ""
        return page, token

    async def get(self, name: str, version: int = 0) -> SkillView:
        """The current version (version 0) or an earlier one, removed or not."""
        if version < 0:
            raise InvalidArgumentError(f"version: must be >= 0, got {version}")
        current = self._current.get(name)
        if current is not None and version in (0, current.stored.version):
            return current
        stored = await self._store.get(name, version) if version else None
        if stored is None:
            what = f"version {version} of skill {name!r}" if version else f"skill {name!r}"
            raise NotFoundError(f"name: no {what} in the library")
        package, graph = await asyncio.to_thread(_load, stored.files, stored.folder, False, self._limits)
        return SkillView(stored, package, graph, node_tokens(graph))

    def hydrate(self, query: str, budget: int, skill_names: Iterable[str] = ()) -> Hydration:
        if not query.strip():
            raise InvalidArgumentError("query: must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgumentError(f"query: {len(query)} characters, more than {MAX_QUERY_CHARS}")
        if not 1 <= budget <= MAX_BUDGET:
            raise InvalidArgumentError(f"budget_tokens: must be 1-{MAX_BUDGET}, got {budget}")
        names = list(skill_names)
        missing = sorted(set(names) - self._current.keys())
        if missing:
            raise NotFoundError(f"skill_names: not in the library: {', '.join(missing)}")
        return hydrate(self.library, query, budget, names)

    async def stats(self) -> tuple[LibraryStats, Compression]:
        """The library's size and compression, measured in a worker thread and cached until it changes."""
        async with self._measuring:
            if self._stats is None or self._stats[0] != self._generation:
                generation, compression = self._generation, self.macros.compression()
                graphs = [view.graph for view in self._current.values()]
                stats = await asyncio.to_thread(library_stats, compression, graphs)
                self._stats = (generation, stats, compression)
            return self._stats[1], self._stats[2]

    def _serve(
        self, stored: SkillVersion, package: SkillPackage, graph: SkillGraph, maintain_macros: bool = True
    ) -> None:
        skill = self.library.add(graph, stored.version)
        self._current[package.name] = SkillView(stored, package, graph, skill.node_tokens)
        if maintain_macros:
            self.macros.add(graph, skill.node_tokens)
        self._generation += 1


def _load(
    files: Mapping[str, bytes], folder: str, strict: bool, limits: PackageLimits
) -> tuple[SkillPackage, SkillGraph]:
    package = load_package(files, folder, strict=strict, limits=limits)
    return package, build_graph(package)


def _encode_page_token(after: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(["skills", after])).decode()


def _decode_page_token(token: str) -> str:
    if not token:
        return ""
    try:
        kind, after = orjson.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError("page_token: not a token returned by ListSkills") from e
    if kind != "skills" or not isinstance(after, str):
        raise InvalidArgumentError("page_token: not a token returned by ListSkills")
    return after
