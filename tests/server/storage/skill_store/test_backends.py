"""One contract for every SkillStore backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.server.errors import DuplicateRowError
from skillstate.server.storage.records import SkillVersion
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
