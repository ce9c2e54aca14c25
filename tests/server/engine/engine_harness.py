"""Drive a StateEngine on the in-memory log from synchronous hypothesis tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.merge import Resolution
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import ConflictError, InvalidArgumentError
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog


@dataclass(frozen=True)
class Write:
    agent_id: str
    base_revision: int
    patch: dict[str, Any]


@dataclass
class Outcome:
    state_json: str
    state_hash: str
    accepted: list[Write]
    rejected: list[Write]


async def submit_all(
    engine: StateEngine, execution_id: str, writes: Sequence[Write]
) -> tuple[list[Write], list[Write]]:
    accepted, rejected = [], []
    for write in writes:
        before = await engine.get_state(execution_id)
        try:
            await engine.submit_patch(execution_id, write.agent_id, write.base_revision, json.dumps(write.patch))
            accepted.append(write)
        except ConflictError:
            assert await engine.get_state(execution_id) == before, "a rejected patch changed the state"
            rejected.append(write)
    return accepted, rejected


def run(
    schema: dict[str, Any],
    initial: dict[str, Any],
    writes: Sequence[Write],
    *,
    setup: Sequence[Write] = (),
    config: EngineConfig = EngineConfig(),
) -> Outcome:
    """Create one execution, apply setup writes, then writes in the order given."""

    async def main() -> Outcome:
        engine = StateEngine(MemoryRevisionLog(), config)
        await engine.start()
        try:
            await engine.create_execution("x", json.dumps(schema), json.dumps(initial))
            await submit_all(engine, "x", setup)
            accepted, rejected = await submit_all(engine, "x", writes)
            view = await engine.get_state("x")
            return Outcome(view.state_json, view.state_hash, accepted, rejected)
        finally:
            await engine.close()

    return asyncio.run(main())


@dataclass(frozen=True)
class Step:
    """What became of one write: accepted (with its resolutions) or refused, and the state after it."""

    write: Write
    accepted: bool
    conflicts: tuple[str, ...]
    """The paths a ConflictError named, sorted; empty if accepted or refused otherwise."""
    invalid: bool
    """Refused with InvalidArgumentError."""
    resolutions: tuple[Resolution, ...]
    state: dict[str, Any]


def run_each(
    schema: dict[str, Any],
    initial: dict[str, Any],
    writes: Sequence[Write],
    *,
    setup: Sequence[Write] = (),
    config: EngineConfig = EngineConfig(),
) -> list[Step]:
    """Like run, but says what became of each write (setup writes must all be accepted)."""

    async def main() -> list[Step]:
        engine = StateEngine(MemoryRevisionLog(), config)
        await engine.start()
        try:
            await engine.create_execution("x", json.dumps(schema), json.dumps(initial))
            _, refused = await submit_all(engine, "x", setup)
            assert not refused, f"setup writes refused: {refused}"
            steps = []
            for write in writes:
                before = await engine.get_state("x")
                accepted, conflicts, invalid, resolutions = False, (), False, ()
                try:
                    result = await engine.submit_patch(
                        "x", write.agent_id, write.base_revision, json.dumps(write.patch)
                    )
                    accepted, resolutions = True, result.resolutions
                except ConflictError as e:
                    conflicts = tuple(sorted(e.paths))
                except InvalidArgumentError:
                    invalid = True
                after = await engine.get_state("x")
                if not accepted:
                    assert after == before, "a refused patch changed the state"
                steps.append(Step(write, accepted, conflicts, invalid, resolutions, json.loads(after.state_json)))
            return steps
        finally:
            await engine.close()

    return asyncio.run(main())
