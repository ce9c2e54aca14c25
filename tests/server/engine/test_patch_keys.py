"""Idempotency keys beyond what memory holds with their revisions: known unused without the log, retries
still recognized (patch_keys.py)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from skillstate.server.engine import patch_keys
from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.patch_keys import KeyFilter
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog


def test_the_filter_holds_every_key_it_was_given_and_few_others() -> None:
    keys = [("agent", uuid.uuid4().hex) for _ in range(50_000)]
    found = KeyFilter(capacity=1_000)  # grows through several stages
    for key in keys:
        found.add(key)
    assert all(key in found for key in keys)
    others = sum(("agent", uuid.uuid4().hex) in found for _ in range(20_000))
    assert others < 20_000 * 0.05, f"{others} of 20,000 fresh keys reported as used"


class CountingLog(SqliteRevisionLog):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.lookups = 0

    async def find_patch(self, execution_id: str, agent_id: str, client_patch_id: str):  # type: ignore[no-untyped-def]
        self.lookups += 1
        return await super().find_patch(execution_id, agent_id, client_patch_id)


async def submit(engine: StateEngine, key: str) -> object:
    head = await engine.head_revision("x")
    return await engine.submit_patch("x", "ada", head, json.dumps({"n": key}), key)


async def test_fresh_keys_need_no_lookup_after_memory_holds_its_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the filter, every submit after MAX_PATCH_IDS keys looked its key up in the log (SQLite then
    read every revision of the execution: 85 commits/s after 100,000). A retry of an old key is still
    answered with its first result."""
    monkeypatch.setattr(patch_keys, "MAX_PATCH_IDS", 4)
    log = CountingLog(tmp_path / "e.db")
    engine = StateEngine(log)
    await engine.start()
    try:
        await engine.create_execution("x", "", "{}")
        for i in range(200):
            await submit(engine, f"k{i}")
        assert log.lookups <= 20, f"{log.lookups} lookups for 200 fresh keys"
        first = await engine.submit_patch("x", "ada", 0, json.dumps({"n": "k0"}), "k0")  # long out of memory
        assert first.duplicate and first.revision == 1
    finally:
        await engine.close()


async def test_a_loaded_execution_files_the_keys_of_its_log_and_its_lookups_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patch_keys, "MAX_PATCH_IDS", 4)
    monkeypatch.setattr(patch_keys, "FILING_PAGE", 16)
    path, config = tmp_path / "e.db", EngineConfig(snapshot_every=10)  # loaded from revision 100: keys unfiled
    first = StateEngine(SqliteRevisionLog(path), config)
    await first.start()
    await first.create_execution("x", "", "{}")
    for i in range(100):
        await submit(first, f"k{i}")
    await first.close()
    log = CountingLog(path)
    loaded = StateEngine(log, config)
    await loaded.start()
    try:
        for i in range(100, 120):  # the first few look their keys up, and file 16 old keys each meanwhile
            await submit(loaded, f"k{i}")
        filing = log.lookups
        assert 0 < filing <= 100 // 16 + 1
        for i in range(120, 220):
            await submit(loaded, f"k{i}")
        assert log.lookups - filing <= 10, f"{log.lookups - filing} lookups for 100 fresh keys, all keys filed"
        again = await loaded.submit_patch("x", "ada", 2, json.dumps({"n": "k2"}), "k2")
        assert again.duplicate and again.revision == 3
    finally:
        await loaded.close()
