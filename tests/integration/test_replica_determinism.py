"""Replicas merge exactly as one server does: the same writes, sent in turn to two engines sharing one
PostgreSQL log, give the same accepted and refused patches, the same states and the same hashes as one
engine on its own log (docs/merge.md's determinism, held on this backend too). Leases are off: with them
one replica would merge every write (the others forward theirs), so this holds replicas that race."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import ConflictError
from skillstate.server.storage.revision_log.base import RevisionLog
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ..postgres import DSN, REQUIRED
from ..server.engine.engine_harness import Write
from ..server.engine.test_merge_properties import AGENTS, POLICY_VALUES, schema_for

if DSN is None:
    pytestmark = pytest.mark.skipif(
        not REQUIRED, reason="PostgreSQL tests SKIPPED: set SKILLSTATE_TEST_POSTGRES=postgresql://..."
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[Write]]:
    """A policy, an initial value and 2-8 writes, each based on some revision already committed."""
    policy = draw(st.sampled_from(sorted(POLICY_VALUES)))
    values = POLICY_VALUES[policy]
    writes = []
    for n in range(draw(st.integers(2, 8))):
        patch: dict[str, Any] = {"v": draw(values)}
        if draw(st.booleans()):
            patch["log"] = [f"entry-{n}"]
        writes.append(Write(draw(st.sampled_from(AGENTS)), draw(st.integers(0, n)), patch))
    return policy, {"v": draw(values), "log": []}, writes


async def replay(
    logs: list[RevisionLog], schema: dict[str, Any], initial: dict[str, Any], writes: list[Write]
) -> list[Any]:
    """Each write sent to engine i % len(logs) in turn; what each answered, and every revision's state."""
    engines = [StateEngine(log, EngineConfig(window=4, lease_seconds=None)) for log in logs]
    for engine in engines:
        await engine.start()
    try:
        await engines[0].create_execution("x", json.dumps(schema), json.dumps(initial))
        answers: list[Any] = []
        for i, write in enumerate(writes):
            engine = engines[i % len(engines)]
            head = (await engine.get_state("x")).revision
            base = min(write.base_revision, head)
            try:
                result = await engine.submit_patch("x", write.agent_id, base, json.dumps(write.patch))
                answers.append(("applied", result.revision, result.state_hash, result.applied_patch_json))
            except ConflictError as e:
                answers.append(("conflict", str(e)))
        last = engines[-1]
        head = (await last.get_state("x")).revision
        states = [(await last.get_state("x", r)).state_json for r in range(head + 1)]
        return [answers, states]
    finally:
        for engine in engines:
            await engine.close()


async def on_postgres(schema: dict[str, Any], initial: dict[str, Any], writes: list[Write]) -> list[Any]:
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    assert DSN is not None
    name = f"det_{uuid.uuid4().hex[:10]}"
    try:
        return await replay([PostgresRevisionLog(DSN, schema=name) for _ in range(2)], schema, initial, writes)
    finally:
        import asyncpg

        connection = await asyncpg.connect(DSN)
        await connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        await connection.close()


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(histories())
def test_two_replicas_merge_as_one_server_does(history: tuple[str, dict[str, Any], list[Write]]) -> None:
    policy, initial, writes = history
    schema = schema_for(policy)
    alone = asyncio.run(replay([MemoryRevisionLog()], schema, initial, writes))
    shared = asyncio.run(on_postgres(schema, initial, writes))
    assert shared == alone
