"""A log written by the engine before the path index (fixtures/make_previous_log.py, at 26e98ac): this one
reads it to the same states and hashes, merges its patches again to the same effective patches, and goes on
writing it."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

FIXTURES = Path(__file__).parent / "fixtures"


def previous_log(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.executescript(gzip.decompress((FIXTURES / "previous_log.sql.gz").read_bytes()).decode())
    return path


async def test_the_previous_log_reads_to_the_same_states_and_hashes(tmp_path: Path) -> None:
    answers = json.loads((FIXTURES / "previous_log.json").read_text())
    engine = StateEngine(SqliteRevisionLog(previous_log(tmp_path / "log.db")), EngineConfig(snapshot_every=50))
    await engine.start()
    try:
        for revision, state_sha, state_hash in answers:
            view = await engine.get_state("warehouse", revision)
            assert (hashlib.sha256(view.state_json.encode()).hexdigest(), view.state_hash) == (state_sha, state_hash)
        head = answers[-1][0]
        for back in (0, 7, 120, head):  # on head, and on bases before the snapshot it was loaded from
            result = await engine.submit_patch("warehouse", "eve", head - back, '{"stock": {"item_9": 1}}')
            assert result.revision == head + 1
            head += 1
        assert json.loads((await engine.get_state("warehouse")).state_json)["stock"]["item_9"] == 4
    finally:
        await engine.close()


async def test_every_patch_of_the_previous_log_merges_again_to_what_it_committed(tmp_path: Path) -> None:
    """Submitted in order on their own bases to a new execution, every patch of the log (merges of every
    policy among them) gives the effective patch and hash the previous engine committed."""
    with sqlite3.connect(previous_log(tmp_path / "log.db")) as db:
        schema, initial = db.execute(
            "SELECT schema_json, state_json FROM executions JOIN snapshots USING (execution_id) WHERE revision = 0"
        ).fetchone()
        revisions = db.execute(
            "SELECT agent_id, base_revision, patch_json, applied_patch_json, state_hash, resolutions_json "
            "FROM revisions ORDER BY revision"
        ).fetchall()
    merged = {policy for *_, resolutions in revisions for _, policy, _ in json.loads(resolutions)}
    assert merged == {"lww", "counter", "set", "append", "text", "max"}, "the log must hold merges of each"
    engine = StateEngine(MemoryRevisionLog())
    await engine.start()
    try:
        await engine.create_execution("warehouse", schema, initial)
        for agent, base, patch, applied, state_hash, _ in revisions:
            result = await engine.submit_patch("warehouse", agent, base, patch)
            assert (result.applied_patch_json, result.state_hash) == (applied, state_hash), (agent, base, patch)
    finally:
        await engine.close()
