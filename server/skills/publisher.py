"""The skill registry's published Snapshot and the writers that replace it, a turn each: a start builds the
first from the store, and a look at a shared store serves what other servers registered or removed.

Each writer builds the next snapshot off to the side in the writer thread, from forks of the current indexes
that share everything the change leaves alone (the seconds of macro maintenance a 10K-skill library costs a
registration run there), then publishes it with one assignment on the loop. A start loads the stored skills
a hop at a time in the writer thread, from the graph records kept of them where it can (records.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

from ..errors import StorageError
from ..storage.records import Counts, SkillVersion
from ..storage.skill_store.base import SkillStore
from . import records
from .bulk import fewer_collections, settle_long_lived
from .graph import Extractor, SkillGraph, build_graph
from .library import SkillLibrary, forget_section_memos
from .macro_index import MacroIndex, Rebuild
from .macro_tables import Evidence
from .macros import Key, Level, key_from_json, key_to_json
from .package import PackageLimits, SkillPackage, load_package
from .snapshot import Draft, Snapshot

log = logging.getLogger(f"{__package__}.registry")  # the registry's logger, whichever of its modules logs
T = TypeVar("T")


RECORDS_PER_SAVE = 1000
RECORD_BYTES_PER_SAVE = 16 << 20
"""A start saves the graph records it made after the hop (SKILLS_PER_HOP) that brings them to this many, or
this many bytes (a record is a few KB, up to a few MB)."""
SKILLS_PER_HOP = 64
"""Stored skills a start loads and indexes in one hop to the writer thread (a hop a skill took 10 s of a 45 s
start at 10K skills: the writer and the event loop taking turns at the interpreter)."""
SYNC_INTERVAL = 1.0
"""Seconds between looks at a shared store for skills other servers registered or removed."""


class SnapshotPublisher:
    """What a SkillRegistry is built on: its store, the snapshot the last writer published, the writers' turns,
    and the threads that build off the loop."""

    def __init__(
        self,
        store: SkillStore,
        limits: PackageLimits = PackageLimits(),
        extractor: Extractor | None = None,
        worker: concurrent.futures.Executor | None = None,
        writer: concurrent.futures.Executor | None = None,
    ) -> None:
        """`worker` runs what would hold the event loop (loading packages, hydrating, measuring the library),
        by default asyncio's default executor. `writer` builds the library at start and every writer's next
        snapshot (maintaining macros: seconds at 10K skills), by default on a thread of the registry's own:
        writers take turns anyway, and one thread keeps their allocations in one malloc arena, where what
        the start and each registration free is reused (spread over the default executor's threads, a
        10K-skill library stayed about 240 MB larger after a dozen registrations)."""
        self._store = store
        self._worker = worker
        self._writer = writer or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="skillstate-skill-writer")
        self._own_writer = writer is None
        self._limits = limits
        self._extractor = extractor
        """Sec2Graph's role and contract extraction when not the deterministic rules (llm_extract.py)."""
        self._snapshot = Snapshot({}, SkillLibrary(), MacroIndex(), 0)
        """The published version: replaced whole by a writer, never changed."""
        self._writing = asyncio.Lock()
        """Writers take turns: each builds the next snapshot from the one the last writer published."""
        self._loading: asyncio.Task[None] | None = None
        self._record_tag: str | None = None
        """The tag this registry's graph records are kept under (records.py); None when it keeps none."""
        self._syncing: asyncio.Task[None] | None = None
        self._synced_at = -float("inf")
        self._closing = False
        """Set by `close`: a start's hop under way in the writer stops at its next skill."""

    @property
    def snapshot(self) -> Snapshot:
        """The library as the last writer published it."""
        return self._snapshot

    @property
    def library(self) -> SkillLibrary:
        """The library as the last registration or removal left it."""
        return self._snapshot.library

    @property
    def macros(self) -> MacroIndex:
        """The library's macros: compressed in full at start, then maintained skill by skill (ReZip)."""
        return self._snapshot.macros

    async def start(self) -> None:
        """Open the store and start rebuilding the library in the background: the server it shares serves
        at once, and calls to the registry wait in `ready()` until the library is whole."""
        await self._store.open()
        self._closing = False
        self._loading = asyncio.create_task(self._rebuild(), name="skillstate-skill-library")

    async def ready(self) -> None:
        """Wait until the library holds every stored skill (raises what rebuilding it raised). Every public
        call waits here first. With a shared store, a look at what other servers changed starts when
        SYNC_INTERVAL has passed: it is a writer, so a reader goes on with the snapshot it finds, and a
        writer takes its turn after the look (`_turn`)."""
        if self._loading is None:
            raise StorageError("the skill registry was not started")
        await asyncio.shield(self._loading)
        if self._sync_due() and (self._syncing is None or self._syncing.done()):
            self._syncing = asyncio.create_task(self._sync_in_turn(), name="skillstate-skill-sync")

    def _sync_due(self) -> bool:
        return self._store.shared and time.monotonic() - self._synced_at > SYNC_INTERVAL

    async def _sync_in_turn(self) -> None:
        """The look a reader started, in a writer's turn (`_turn` looks when one is due)."""
        try:
            async with self._turn():
                pass
        except Exception:  # the next call looks again
            log.warning("looking at the shared skill store failed", exc_info=True)

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[Snapshot]:
        """A writer's turn, after a look at a shared store if one is due; yields the snapshot to build on."""
        async with self._writing:
            if self._sync_due():
                await self._sync()
            yield self._snapshot

    async def _sync(self) -> None:
        """Serve what other servers registered or removed in a shared store since this one last looked."""
        self._synced_at = time.monotonic()
        stored = await self._store.current_versions()
        views, tag = self._snapshot.views, self._record_tag
        gone = [name for name in views if name not in stored]
        arrived = []
        made: list[tuple[str, int, bytes]] = []
        """records of the versions built here (the registering server kept none this code can read)"""
        try:
            for name, number in sorted(stored.items()):
                current = views.get(name)
                if current is not None and current.stored.version == number:
                    continue
                version = await self._store.get(name, number)
                if version is not None:  # from the record the registering server kept, when this code made it
                    record = await self._kept_record(tag, version) if tag else None
                    package, graph = await self._off_loop(self._loaded, version, record, made if tag else None)
                    arrived.append((version, package, graph))
        finally:  # (even when the look fails: what was built need not be built again)
            if tag and made:
                await self._keep_records(tag, made)

        def change(draft: Draft) -> None:
            for name in gone:
                draft.forget(name)
            for version, package, graph in arrived:
                draft.serve(version, package, graph)

        if gone or arrived:
            await self._change(change)

    async def close(self) -> None:
        self._closing = True
        for task in (self._loading, self._syncing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._store.close()
        if self._own_writer:
            self._writer.shutdown(wait=False, cancel_futures=True)

    async def _rebuild(self) -> None:
        draft = Draft(self._snapshot)
        draft.macros.revised = {
            key_from_json(key): Level(level) if level else None
            for key, level in (await self._store.macro_revisions()).items()
        }
        rebuild = draft.macros.rebuilding()
        # (a model's graphs are not kept; the tag reads the code's source, off the loop)
        tag = await self._off_loop(records.tag, self._limits) if self._extractor is None else None
        self._record_tag = tag
        kept = await self._kept_records(tag) if tag else {}
        made: list[tuple[str, int, bytes]] = []
        """graph records made by this start, saved a batch at a time"""
        unsaved = 0
        """bytes of the records in `made`"""
        with fewer_collections():
            try:
                versions = await self._store.current()
                for first in range(0, len(versions), SKILLS_PER_HOP):  # loaded and indexed in the writer
                    batch = [(v, kept.pop((v.name, v.version), None)) for v in versions[first : first + SKILLS_PER_HOP]]
                    count = len(made)
                    await self._off_loop(self._load_into, draft, batch, rebuild, made if tag else None, writer=True)
                    unsaved += sum(len(r) for *_, r in made[count:])
                    if tag and (len(made) >= RECORDS_PER_SAVE or unsaved >= RECORD_BYTES_PER_SAVE):
                        await self._keep_records(tag, made)
                        unsaved = 0
                await self._off_loop(rebuild.finish, writer=True)
            finally:  # (emptying them takes ~50 ms: in the writer, after its hop, unless it was shut down)
                with contextlib.suppress(RuntimeError):
                    self._writer.submit(forget_section_memos)
        if tag:
            await self._keep_records(tag, made, forget_stale=True)
        views = draft.views or {}
        counted = await self._store.macro_evidence()
        # counting goes on where it stopped, for the keys that are still macros
        gone = await self._off_loop(_restore_evidence, draft.macros, counted, writer=True)
        if gone:
            await self._store.save_evidence({key_to_json(key): None for key in gone})
        self._publish(await self._off_loop(draft.snapshot, writer=True))
        log.info("skill library ready: %d skills, %d macros", len(views), len(self.macros))

    async def _build(self, change: Callable[[Draft], T]) -> tuple[Snapshot, T, dict[str, Counts | None]]:
        """The next snapshot, built in the writer thread: the current one forked, changed and settled (called
        in a writer's turn); with what the change did to the evidence counted, for the store."""
        base = self._snapshot

        def build() -> tuple[Snapshot, T, dict[str, Counts | None]]:
            draft = Draft(base)
            result = change(draft)
            return draft.snapshot(), result, draft.evidence_changes(base)

        return await self._off_loop(build, writer=True)

    async def _change(self, change: Callable[[Draft], object]) -> None:
        """Build the next snapshot, store what it did to the evidence (a removal retires macros, and their
        evidence with them), and publish it."""
        snapshot, _, changes = await self._build(change)
        if changes:
            await self._store.save_evidence(changes)
        self._publish(snapshot)

    def _publish(self, snapshot: Snapshot) -> None:
        replaced = [self._snapshot]
        self._snapshot = snapshot
        settle_long_lived()  # the new tables join the library out of the full collections' reach
        with contextlib.suppress(RuntimeError):  # the writer is shut down: freed here
            # the tables only the replaced snapshot held take ms to free (tens at 10K skills): in the writer,
            # unless a reader still holds it (then freed where that reader lets go)
            self._writer.submit(replaced.clear)

    async def _off_loop(self, work: Callable[..., T], *args: Any, writer: bool = False) -> T:
        executor = self._writer if writer else self._worker
        return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(work, *args))

    def _load_into(
        self,
        draft: Draft,
        batch: list[tuple[SkillVersion, bytes | None]],
        rebuild: Rebuild,
        made: list[Any] | None,
    ) -> None:
        """Serve stored versions (`_loaded` from their graph records, if any), unless the registry is closing."""
        for stored, record in batch:
            if self._closing:
                return
            draft.serve(stored, *self._loaded(stored, record, made), rebuild)

    def _loaded(
        self, stored: SkillVersion, record: bytes | None, made: list[Any] | None
    ) -> tuple[SkillPackage, SkillGraph]:
        """A stored version's package and graph: from its graph record, or else loaded and built again (its
        record added to `made`, when given)."""
        if record is not None:
            try:
                return records.decode(record, stored.files, stored.name)
            except records.RecordError as e:
                log.warning("skill %r version %d: its graph record is unusable (%s): built again", stored.name,
                            stored.version, e)  # fmt: skip
        loaded = self._load(stored.files, stored.folder, False)
        if made is not None:
            made.append((stored.name, stored.version, records.encode(*loaded)))
        return loaded

    async def _kept_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        """The graph records kept under the tag; none when the store cannot read them (every skill built)."""
        try:
            return await self._store.graph_records(tag)
        except Exception:
            log.warning("reading skill graph records failed: every skill is loaded and built", exc_info=True)
            return {}

    async def _kept_record(self, tag: str, stored: SkillVersion) -> bytes | None:
        """The graph record of a version under the tag, if kept; none when the store cannot read it."""
        try:
            return await self._store.graph_record(tag, stored.name, stored.version)
        except Exception:
            log.warning("reading the graph record of skill %r version %d failed: it is built again", stored.name,
                        stored.version, exc_info=True)  # fmt: skip
            return None

    async def _keep_records(self, tag: str, made: list[tuple[str, int, bytes]], forget_stale: bool = False) -> None:
        """Save the graph records made so far (and forget stale ones): a start or a look at a shared store goes
        on if the store refuses."""
        try:
            if made:
                await self._store.save_graph_records(tag, made)
            if forget_stale:
                await self._store.forget_graph_records(tag)
        except Exception:
            log.warning("keeping skill graph records failed: those skills are built again next time", exc_info=True)
        made.clear()

    def _load(self, files: Mapping[str, bytes], folder: str, strict: bool) -> tuple[SkillPackage, SkillGraph]:
        package = load_package(files, folder, strict=strict, limits=self._limits)
        return package, build_graph(package, self._extractor)


def _restore_evidence(macros: MacroIndex, counted: Mapping[str, Counts]) -> list[Key]:
    return macros.restore_evidence({key_from_json(key): Evidence(*counts) for key, counts in counted.items()})
