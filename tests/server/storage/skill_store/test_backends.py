"""One contract for every SkillStore backend."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.server.errors import DuplicateRowError
from skillstate.server.storage.records import SkillVersion, StoredHydration
from skillstate.server.storage.skill_store.base import SkillStore
from skillstate.server.storage.skill_store.memory import MemorySkillStore
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

from ....postgres import postgres_schema  # noqa: F401 - a fixture


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SkillStore]:
    opened: SkillStore
    if request.param == "postgres":
        from skillstate.server.storage.skill_store.postgres import PostgresSkillStore

        dsn, schema = request.getfixturevalue("postgres_schema")
        opened = PostgresSkillStore(dsn, schema=schema)
    else:
        opened = MemorySkillStore() if request.param == "memory" else SqliteSkillStore(tmp_path / "s.db")
    await opened.open()
    yield opened
    await opened.close()


def version(name: str, number: int, content: bytes = b"x") -> SkillVersion:
    return SkillVersion(name, number, f"digest-{number}", name, 1000.0 + number, {f"{name}/SKILL.md": content})


async def test_current_is_the_newest_version_of_each_name_not_removed(store: SkillStore) -> None:
    await store.add(version("b", 1))
    await store.add(version("a", 1))
    await store.add(version("a", 2, b"second"))
    assert [(v.name, v.version, v.files) for v in await store.current()] == [
        ("a", 2, {"a/SKILL.md": b"second"}),
        ("b", 1, {"b/SKILL.md": b"x"}),
    ]
    await store.mark_removed("a", 2, 2000.0)
    assert [v.name for v in await store.current()] == ["b"]
    assert await store.newest_version("a") == 2 and await store.newest_version("zzz") == 0
    removed = await store.get("a", 2)
    assert removed is not None and removed.removed_at == 2000.0 and removed.files == {"a/SKILL.md": b"second"}
    assert await store.get("a", 3) is None


async def test_current_comes_in_code_point_order_whatever_the_database_collates(store: SkillStore) -> None:
    names = ["abb", "ab-c", "a-z", "aa", "b"]
    for name in names:
        await store.add(version(name, 1))
    assert [v.name for v in await store.current()] == sorted(names)


async def test_postgres_current_ignores_a_collation_that_skips_punctuation(request: pytest.FixtureRequest) -> None:
    """A database may collate names otherwise than Python sorts them (glibc's en_US ignores hyphens); here
    the name column is given an ICU collation that does."""
    import asyncpg

    from skillstate.server.storage.skill_store.postgres import PostgresSkillStore

    dsn, schema = request.getfixturevalue("postgres_schema")
    store = PostgresSkillStore(dsn, schema=schema)
    await store.open()
    try:
        names = ["abb", "ab-c", "a-z", "aa", "b"]
        for name in names:
            await store.add(version(name, 1))
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(
                f"CREATE COLLATION {schema}.punctuation_blind (provider = icu, locale = 'und-u-ka-shifted');"
                f"ALTER TABLE {schema}.skill_versions ALTER COLUMN name TYPE text COLLATE {schema}.punctuation_blind"
            )
            collated = [
                row["name"] for row in await connection.fetch(f"SELECT name FROM {schema}.skill_versions ORDER BY name")
            ]
        finally:
            await connection.close()
        assert collated == ["aa", "abb", "ab-c", "a-z", "b"]
        assert [v.name for v in await store.current()] == sorted(names) == ["a-z", "aa", "ab-c", "abb", "b"]
    finally:
        await store.close()


async def test_a_version_is_stored_once(store: SkillStore) -> None:
    await store.add(version("a", 1))
    with pytest.raises(DuplicateRowError):
        await store.add(version("a", 1, b"other"))
    stored = await store.get("a", 1)
    assert stored is not None and stored.files == {"a/SKILL.md": b"x"}


async def test_sqlite_keeps_everything_across_a_reopen(tmp_path: Path) -> None:
    first = SqliteSkillStore(tmp_path / "s.db")
    await first.open()
    await first.add(version("a", 1, b"\x00binary\xff"))
    await first.close()
    second = SqliteSkillStore(tmp_path / "s.db")
    await second.open()
    assert [(v.name, v.files) for v in await second.current()] == [("a", {"a/SKILL.md": b"\x00binary\xff"})]
    await second.close()


async def test_macro_revisions_are_kept_and_replaced(store: SkillStore) -> None:
    assert await store.macro_revisions() == {}
    await store.save_macro_revision('[["a"]]', 3)
    await store.save_macro_revision('[["b"]]', None)
    await store.save_macro_revision('[["a"]]', 4)
    assert await store.macro_revisions() == {'[["a"]]': 4, '[["b"]]': None}


async def test_evidence_levels_and_the_reported_hydration_are_saved_together(store: SkillStore) -> None:
    assert await store.macro_evidence() == {}
    await store.keep_hydration(StoredHydration("h1", '{"macros": []}'), keep=10)
    await store.save_evidence({'[["a"]]': (2, 1, 0), '[["b"]]': (1, 0, 1)})
    assert await store.macro_evidence() == {'[["a"]]': (2, 1, 0), '[["b"]]': (1, 0, 1)}
    await store.save_evidence({'[["a"]]': (3, 2, 0), '[["b"]]': None}, {'[["b"]]': 3}, reported="h1")
    assert await store.macro_evidence() == {'[["a"]]': (3, 2, 0)}
    assert await store.macro_revisions() == {'[["b"]]': 3}
    assert await store.kept_hydration("h1") is None  # one report per hydration
    many = {f'[["k{i}"]]': (i, 0, 0) for i in range(2500)}  # more rows than one statement writes
    await store.save_evidence(many)
    await store.save_evidence(dict.fromkeys(list(many)[:1500]))
    assert len(await store.macro_evidence()) == 1 + 1000


async def test_only_the_newest_hydrations_are_kept_each_with_its_expansions(store: SkillStore) -> None:
    for name in ("h1", "h2", "h3"):
        await store.keep_hydration(StoredHydration(name, f'{{"n": "{name}"}}'), keep=3)
    await store.add_expansion("h1", "m-1")
    await store.add_expansion("h1", "m-1")  # once
    await store.add_expansion("h1", "m-2")
    await store.add_expansion("gone", "m-1")  # nothing: not kept
    assert await store.kept_hydration("h1") == StoredHydration("h1", '{"n": "h1"}', frozenset({"m-1", "m-2"}))
    await store.keep_hydration(StoredHydration("h4", "{}"), keep=3)  # h1 is the oldest: forgotten
    assert await store.kept_hydration("h1") is None and await store.kept_hydration("gone") is None
    await store.keep_hydration(StoredHydration("h2", '{"again": 1}'), keep=3)  # hydrated again: the newest now
    await store.keep_hydration(StoredHydration("h5", "{}"), keep=3)  # so h3 goes
    assert await store.kept_hydration("h3") is None
    assert await store.kept_hydration("h2") == StoredHydration("h2", '{"again": 1}')
    assert [await store.kept_hydration(name) is not None for name in ("h4", "h5")] == [True, True]


PREVIOUS_SQLITE_SCHEMA = """
CREATE TABLE skill_versions (name TEXT NOT NULL, version INTEGER NOT NULL, digest TEXT NOT NULL, folder TEXT NOT NULL,
    registered_at REAL NOT NULL, removed_at REAL, PRIMARY KEY (name, version)) WITHOUT ROWID;
CREATE TABLE skill_files (name TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL, content BLOB NOT NULL,
    PRIMARY KEY (name, version, path), FOREIGN KEY (name, version) REFERENCES skill_versions (name, version))
    WITHOUT ROWID;
CREATE TABLE macro_revisions (key_json TEXT PRIMARY KEY, level INTEGER) WITHOUT ROWID;
INSERT INTO skill_versions VALUES ('a', 1, 'digest-1', 'a', 1001.0, NULL);
INSERT INTO skill_files VALUES ('a', 1, 'a/SKILL.md', X'78');
INSERT INTO macro_revisions VALUES ('[["a"]]', 3);
"""
"""The skill store's tables before macro evidence and kept hydrations were stored, with a row in each."""


async def assert_upgraded(store: SkillStore) -> None:
    """The previous schema's rows are there, and what it lacked works."""
    assert [(v.name, v.version, v.files) for v in await store.current()] == [("a", 1, {"a/SKILL.md": b"x"})]
    assert await store.macro_revisions() == {'[["a"]]': 3}
    await store.save_evidence({'[["a"]]': (1, 1, 0)}, {'[["a"]]': 4})
    await store.keep_hydration(StoredHydration("h", "{}"), keep=5)
    await store.add_expansion("h", "m-1")
    assert await store.macro_evidence() == {'[["a"]]': (1, 1, 0)}
    assert await store.kept_hydration("h") == StoredHydration("h", "{}", frozenset({"m-1"}))


async def test_a_sqlite_file_of_the_previous_schema_is_opened_and_gains_the_new_tables(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "old.db") as connection:
        connection.executescript(PREVIOUS_SQLITE_SCHEMA)
    store = SqliteSkillStore(tmp_path / "old.db")
    await store.open()
    try:
        await assert_upgraded(store)
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "old.db") as connection:  # a save numbers itself without reading every record
        plan = connection.execute("EXPLAIN QUERY PLAN SELECT COALESCE(MAX(saved), 0) + 1 FROM skill_graph_records")
        assert "skill_graph_records_by_saved" in " ".join(str(row) for row in plan)


async def test_a_postgres_schema_of_the_previous_version_is_opened_and_gains_the_new_tables(
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    import asyncpg

    from skillstate.server.storage.skill_store.postgres import PostgresSkillStore

    dsn, schema = postgres_schema
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(
            f"CREATE SCHEMA {schema}; SET search_path TO {schema}; "
            + PREVIOUS_SQLITE_SCHEMA.replace("WITHOUT ROWID", "").replace("REAL", "DOUBLE PRECISION")
            .replace("INTEGER", "BIGINT").replace("BLOB", "BYTEA").replace("X'78'", "'\\x78'::bytea")
        )  # fmt: skip
    finally:
        await connection.close()
    store = PostgresSkillStore(dsn, schema=schema)
    await store.open()
    try:
        await assert_upgraded(store)
    finally:
        await store.close()


async def test_graph_records_are_kept_per_current_version_and_tag(store: SkillStore) -> None:
    await store.add(version("a", 1))
    await store.add(version("b", 1))
    await store.save_graph_records("t1", [("a", 1, b"a1"), ("b", 1, b"b1")])
    assert await store.graph_records("t1") == {("a", 1): b"a1", ("b", 1): b"b1"}
    assert await store.graph_records("t2") == {}  # made by other code: not read back

    await store.add(version("a", 2, b"second"))  # a's record is of a version no longer current
    assert await store.graph_records("t1") == {("b", 1): b"b1"}
    assert await store.graph_record("t1", "a", 1) == b"a1" and await store.graph_record("t1", "a", 2) is None
    await store.save_graph_records("t1", [("a", 2, b"a2"), ("b", 1, b"b1 again")])
    assert await store.graph_records("t1") == {("a", 2): b"a2", ("b", 1): b"b1 again"}

    await store.mark_removed("b", 1, 2000.0)
    await store.save_graph_records("t2", [("a", 2, b"a2 by other code")])
    await store.forget_graph_records("t2")  # forgets b's, removed; t1's stay: the other tag saved last
    assert await store.graph_records("t1") == {("a", 2): b"a2"}
    assert await store.graph_records("t2") == {("a", 2): b"a2 by other code"}
    await store.forget_graph_records("t1")  # from the other side too (a rolling upgrade)
    assert await store.graph_records("t2") == {("a", 2): b"a2 by other code"}

    assert await store.graph_record("t2", "a", 2) == b"a2 by other code"  # one version's, for another server
    assert await store.graph_record("t1", "a", 2) == b"a2"
    assert await store.graph_record("t3", "a", 2) is None and await store.graph_record("t2", "b", 1) is None

    await store.save_graph_records("t3", [("a", 2, b"a2 by newer code")])
    await store.save_graph_records("t1", [])  # (an empty save numbers nothing)
    await store.forget_graph_records("t3")  # keeps t3 and t2, saved after t1
    assert await store.graph_records("t1") == {}
    assert await store.graph_records("t2") == {("a", 2): b"a2 by other code"}
    assert await store.graph_records("t3") == {("a", 2): b"a2 by newer code"}
