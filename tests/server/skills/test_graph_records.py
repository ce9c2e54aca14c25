"""Graph records: a skill version's loaded package and graph, kept in the skill store so that a restart reads
them back instead of loading and building every skill again, and only when the same code made them."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import zlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from bench.synthetic import generate_library
from skillstate.server.errors import StorageError
from skillstate.server.skills import publisher, records
from skillstate.server.skills.graph import build_graph
from skillstate.server.skills.package import PackageLimits, load_package
from skillstate.server.skills.registry import SkillRegistry
from skillstate.server.skills.tokens import count_tokens
from skillstate.server.storage.records import SkillVersion
from skillstate.server.storage.skill_store.base import SkillStore
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

from ...postgres import postgres_schema  # noqa: F401 - a fixture
from .corpus import corpus_packages, require_corpus

SKILLS = generate_library(12, seed=5, references=True)
QUERIES = ["reconcile the invoice totals", "validate the schema before you publish", "notify the owners"]


def test_a_record_gives_back_the_package_and_graph_it_was_made_of() -> None:
    for skill in SKILLS:
        package = load_package(skill.files, skill.folder)
        graph = build_graph(package)
        assert records.decode(records.encode(package, graph), skill.files, package.name) == (package, graph)


def test_every_corpus_package_comes_back_from_its_record() -> None:
    """Real packages: lenient loading's warnings, references, resources, licenses, odd texts."""
    for loaded in corpus_packages(require_corpus()):
        package = loaded.package
        graph = build_graph(package)
        record = records.encode(package, graph)
        assert records.decode(record, package.files, package.name) == (package, graph), loaded.folder


def test_a_damaged_record_is_refused() -> None:
    package = load_package(SKILLS[0].files, SKILLS[0].folder)
    record = records.encode(package, build_graph(package))
    for damaged in (record[: len(record) // 2], b"not a record", zlib.compress(b'{"graph": [1, 2]}')):
        with pytest.raises(records.RecordError):
            records.decode(damaged, package.files, package.name)


def test_a_record_keeps_each_sections_token_count_and_refuses_one_that_is_not_a_count() -> None:
    package = load_package(SKILLS[0].files, SKILLS[0].folder)
    graph = build_graph(package)
    _, decoded = records.decode(records.encode(package, graph), package.files, package.name)
    assert [node.tokens for node in decoded.nodes] == [count_tokens(node.text) for node in graph.nodes]
    fields = json.loads(zlib.decompress(records.encode(package, graph)))
    for bad in (-1, 2.5, "12", None, True):
        fields["graph"][3][0][-1] = bad
        with pytest.raises(records.RecordError, match="tokens"):
            records.decode(zlib.compress(json.dumps(fields).encode()), package.files, package.name)


def test_the_tag_follows_the_package_limits() -> None:
    assert records.tag(PackageLimits()) == records.tag(PackageLimits())
    assert records.tag(PackageLimits()) != records.tag(PackageLimits(max_reference_edges=10))


@pytest.fixture
async def stored(tmp_path: Path) -> AsyncIterator[Path]:
    """A SQLite skill store holding the skills' versions and no graph record (as a store of an earlier release)."""
    path = tmp_path / "skills.db"
    store = SqliteSkillStore(path)
    await store.open()
    for skill in SKILLS:
        package = load_package(skill.files, skill.folder)
        await store.add(SkillVersion(package.name, 1, package.digest, package.folder, 1000.0, package.files))
    await store.close()
    yield path


async def started(path: Path, store: SqliteSkillStore | None = None, **options: object) -> SkillRegistry:
    registry = SkillRegistry(store or SqliteSkillStore(path), **options)  # type: ignore[arg-type]
    await registry.start()
    try:
        await registry.ready()
    except BaseException:
        await registry.close()
        raise
    return registry


def tag_of(limits: PackageLimits = PackageLimits()) -> str:
    made = records.tag(limits)
    assert made is not None
    return made


async def kept_records(path: Path, limits: PackageLimits = PackageLimits()) -> dict[tuple[str, int], bytes]:
    store = SqliteSkillStore(path)
    await store.open()
    try:
        return await store.graph_records(tag_of(limits))
    finally:
        await store.close()


async def replace_record(path: Path, name: str, record: bytes, limits: PackageLimits = PackageLimits()) -> None:
    store = SqliteSkillStore(path)
    await store.open()
    try:
        await store.save_graph_records(tag_of(limits), [(name, 1, record)])
    finally:
        await store.close()


def stored_rows(path: Path) -> list[tuple[str, int]]:
    """Every (name, version) the store's table of graph records holds, whatever its tag or version."""
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT name, version FROM skill_graph_records"))


async def contexts(registry: SkillRegistry) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    return [((h := await registry.hydrate(query, 2000)).context, h.sections) for query in QUERIES]


async def test_a_start_keeps_every_skills_record_and_the_next_serves_the_same_from_them(stored: Path) -> None:
    built = await started(stored)  # no records yet: every skill loaded and built
    try:
        from_scratch = await contexts(built)
        views = {name: (view.package, view.graph) for name, view in built.snapshot.views.items()}
    finally:
        await built.close()
    kept = await kept_records(stored)
    assert set(kept) == {(name, 1) for name in views}
    for (name, _), record in kept.items():
        assert records.decode(record, views[name][0].files, name) == views[name]

    from_records = await started(stored)
    try:
        assert await contexts(from_records) == from_scratch
        assert {name: (v.package, v.graph) for name, v in from_records.snapshot.views.items()} == views
    finally:
        await from_records.close()


async def test_a_record_is_what_a_start_serves_and_a_damaged_one_is_built_again(stored: Path) -> None:
    await (await started(stored)).close()  # records kept
    name = SKILLS[0].name
    package = load_package(SKILLS[0].files, SKILLS[0].folder)
    graph = build_graph(package)
    marked = dataclasses.replace(graph, description="marked: served from its record")
    await replace_record(stored, name, records.encode(package, marked))

    registry = await started(stored)
    try:
        assert (await registry.get(name)).graph.description == "marked: served from its record"
    finally:
        await registry.close()

    other = load_package(SKILLS[1].files, SKILLS[1].folder)
    crafted = zlib.compress(b"[" * 100_000)  # nesting the JSON decoder cannot follow
    for bad in (b"damaged", crafted, records.encode(other, build_graph(other))):  # the last: another skill's
        await replace_record(stored, name, bad)
        registry = await started(stored)
        try:
            assert (await registry.get(name)).graph == graph  # built again from its files
        finally:
            await registry.close()
        assert records.decode((await kept_records(stored))[(name, 1)], SKILLS[0].files, name)[1] == graph  # kept again


async def test_with_an_extractor_records_are_neither_read_nor_kept(stored: Path) -> None:
    name = SKILLS[0].name
    package = load_package(SKILLS[0].files, SKILLS[0].folder)
    graph = build_graph(package)
    await replace_record(stored, name, records.encode(package, dataclasses.replace(graph, description="marked")))

    registry = await started(stored, extractor=lambda title, text, fallback: fallback)
    try:
        assert (await registry.get(name)).graph == graph
    finally:
        await registry.close()
    assert set(await kept_records(stored)) == {(name, 1)}  # only the one the test wrote


async def test_records_are_kept_under_the_limits_they_were_made_with(stored: Path) -> None:
    limits = PackageLimits(max_reference_edges=30_000)
    await (await started(stored, limits=limits)).close()
    assert await kept_records(stored) == {}
    assert len(await kept_records(stored, limits)) == len(SKILLS)

    name = SKILLS[0].name
    package = load_package(SKILLS[0].files, SKILLS[0].folder, limits=limits)
    marked = dataclasses.replace(build_graph(package), description="marked")
    await replace_record(stored, name, records.encode(package, marked), limits)
    registry = await started(stored, limits=limits)
    try:
        assert (await registry.get(name)).graph.description == "marked"
    finally:
        await registry.close()


async def test_a_start_forgets_the_records_of_versions_no_longer_current(stored: Path) -> None:
    await (await started(stored)).close()
    assert stored_rows(stored) == sorted((skill.name, 1) for skill in SKILLS)
    registry = await started(stored)
    try:
        changed = dict(SKILLS[0].files)
        changed[f"{SKILLS[0].folder}/SKILL.md"] += b"\n## Afterword\n\nOne more section, to make a version 2.\n"
        await registry.register(changed, SKILLS[0].folder)
        await registry.remove(SKILLS[1].name)
    finally:
        await registry.close()
    assert (SKILLS[0].name, 2) in await kept_records(stored)  # a registration keeps its record at once
    await (await started(stored)).close()
    expected = sorted([(skill.name, 1) for skill in SKILLS[2:]] + [(SKILLS[0].name, 2)])
    assert stored_rows(stored) == expected


class UnreliableStore(SqliteSkillStore):
    """The SQLite skill store, refusing to read or to keep graph records, as a store short of space or of an
    older schema might."""

    def __init__(self, path: Path, refuse: str) -> None:
        super().__init__(path)
        self.refuse = refuse

    async def graph_records(self, tag: str) -> dict[tuple[str, int], bytes]:
        if self.refuse == "read":
            raise StorageError("cannot read graph records (injected)")
        return await super().graph_records(tag)

    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        if self.refuse == "save":
            raise StorageError("cannot save graph records (injected)")
        await super().save_graph_records(tag, records)


@pytest.mark.parametrize("refuse", ["read", "save"])
async def test_a_store_that_refuses_graph_records_still_starts_with_every_skill(stored: Path, refuse: str) -> None:
    if refuse == "read":
        await (await started(stored)).close()  # records to refuse to read
    registry = await started(stored, UnreliableStore(stored, refuse))  # to save: every record, refused
    try:
        assert sorted(registry.snapshot.views) == sorted(skill.name for skill in SKILLS)
        served = await contexts(registry)
    finally:
        await registry.close()
    if refuse == "save":
        assert await kept_records(stored) == {}
    plain = await started(stored)
    try:
        assert await contexts(plain) == served
    finally:
        await plain.close()


class CountingStore(SqliteSkillStore):
    """The SQLite skill store, counting the graph records of each save."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saved: list[int] = []

    async def save_graph_records(self, tag: str, records: Sequence[tuple[str, int, bytes]]) -> None:
        self.saved.append(len(records))
        await super().save_graph_records(tag, records)


@pytest.mark.parametrize(
    ("records_per_save", "bytes_per_save", "saves"),
    [(4, 16 << 20, [6, 6]), (1000, 1, [3, 3, 3, 3])],  # (12 skills, 3 a hop: a save after the hop that reaches either)
)
async def test_a_start_saves_records_as_it_makes_them_a_few_hops_at_a_time(
    stored: Path, monkeypatch: pytest.MonkeyPatch, records_per_save: int, bytes_per_save: int, saves: list[int]
) -> None:
    monkeypatch.setattr(publisher, "SKILLS_PER_HOP", 3)
    monkeypatch.setattr(publisher, "RECORDS_PER_SAVE", records_per_save)
    monkeypatch.setattr(publisher, "RECORD_BYTES_PER_SAVE", bytes_per_save)
    store = CountingStore(stored)
    await (await started(stored, store)).close()
    assert store.saved == saves
    assert len(await kept_records(stored)) == len(SKILLS)


class SharedSqliteStore(SqliteSkillStore):
    """The SQLite skill store, said to be shared as PostgreSQL's is: registries over one file look for each
    other's registrations."""

    shared = True


class BlindSharedStore(SharedSqliteStore):
    """A shared store that cannot read one version's graph record."""

    async def graph_record(self, tag: str, name: str, version: int) -> bytes | None:
        raise StorageError("cannot read a graph record (injected)")


def shared_stores(backend: str, request: pytest.FixtureRequest, path: Path) -> tuple[SkillStore, SkillStore]:
    """Two stores over one database, as two servers open it."""
    if backend == "postgres":
        from skillstate.server.storage.skill_store.postgres import PostgresSkillStore

        dsn, schema = request.getfixturevalue("postgres_schema")
        return PostgresSkillStore(dsn, schema=schema), PostgresSkillStore(dsn, schema=schema)
    return SharedSqliteStore(path), SharedSqliteStore(path)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_server_serves_what_another_registered_in_a_shared_store_from_its_record(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher, "SYNC_INTERVAL", 0.0)  # each writer's turn looks at the store
    one, other = shared_stores(backend, request, tmp_path / "shared.db")
    first = await started(tmp_path, one)
    second = await started(tmp_path, other)
    try:
        name, package = SKILLS[0].name, load_package(SKILLS[0].files, SKILLS[0].folder)
        await first.register(SKILLS[0].files, SKILLS[0].folder)
        marked = dataclasses.replace(build_graph(package), description="marked: served from its record")
        await other.save_graph_records(tag_of(), [(name, 1, records.encode(package, marked))])
        await second.register(SKILLS[1].files, SKILLS[1].folder)  # its turn takes up the first one's skill
        # (read from the snapshot: a call would start a look of its own, which could take up what follows)
        assert second.snapshot.views[name].graph.description == "marked: served from its record"

        later = {path: data + b"\nA line added in version 2.\n" if path.endswith("/SKILL.md") else data
                 for path, data in SKILLS[0].files.items()}  # fmt: skip
        await first.register(later, SKILLS[0].folder)
        await other.save_graph_records(tag_of(), [(name, 2, b"damaged")])
        await second.register(SKILLS[2].files, SKILLS[2].folder)
        served = await second.get(name)
        assert served.stored.version == 2
        assert served.graph == build_graph(load_package(later, SKILLS[0].folder))  # built from its files
        kept = await other.graph_record(tag_of(), name, 2)
        assert kept is not None and records.decode(kept, later, name)[1] == served.graph  # and its record kept again

        await first.remove(name)
        await second.register(SKILLS[3].files, SKILLS[3].folder)
        assert name not in second.snapshot.views
    finally:
        await first.close()
        await second.close()


async def test_a_server_that_cannot_read_anothers_record_builds_the_skill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publisher, "SYNC_INTERVAL", 0.0)
    path = tmp_path / "shared.db"
    first, second = await started(tmp_path, SharedSqliteStore(path)), await started(tmp_path, BlindSharedStore(path))
    try:
        name, package = SKILLS[0].name, load_package(SKILLS[0].files, SKILLS[0].folder)
        await first.register(SKILLS[0].files, SKILLS[0].folder)
        marked = dataclasses.replace(build_graph(package), description="marked: served from its record")
        await replace_record(path, name, records.encode(package, marked))
        await second.register(SKILLS[1].files, SKILLS[1].folder)
        assert (await second.get(name)).graph == build_graph(package)  # built: the record was not read
    finally:
        await first.close()
        await second.close()
