"""`submit_patch_now` (a Session's submit merged on the spot) decides exactly as `submit_patch` does: the
same interleaving of writes through either gives the same log, byte for byte, and the same refusals; and the
listener a Session answers through hears each outcome once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import StateError, StorageError
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "x-merge": "counter"},
        "tags": {"type": "array", "x-merge": "set"},
        "owner": {"type": "string"},
        "note": {"type": "string", "x-merge": "lww"},
        "small": {"type": "integer", "maximum": 5},
    },
}

writes = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 6),  # how far behind the head its base is
        st.sampled_from(
            [
                {"count": 1},
                {"tags": ["x"]},
                {"tags": ["y"], "count": 2},
                {"owner": "a"},
                {"owner": None},
                {"note": "n"},
                {"small": 9},  # a schema violation
                {"free": 1},
            ]
        ),
        st.sampled_from(["", "k1", "k2"]),  # idempotency keys, reused on purpose
    ),
    max_size=40,
)


async def run(sequence: list[tuple[str, int, dict[str, Any], str]], now: bool) -> tuple[list[Any], list[Any]]:
    engine = StateEngine(MemoryRevisionLog())
    await engine.start()
    await engine.create_execution("x", json.dumps(SCHEMA), json.dumps({"count": 0, "tags": []}))
    outcomes: list[Any] = []
    for agent, behind, patch, key in sequence:
        head = await engine.head_revision("x")
        args = ("x", agent, max(0, head - behind), json.dumps(patch), key and f"{key}-{len(outcomes) % 3}", "")
        try:
            committing = engine.submit_patch_now(*args) if now else None
            if committing is not None:
                await committing.durable
                result = committing.result
            else:
                result = await engine.submit_patch(*args)
            outcomes.append((result.revision, result.state_hash, result.applied_patch_json, result.duplicate))
        except StateError as refused:
            outcomes.append((type(refused).__name__, str(refused)))
    history = await engine.history("x", 1, 0, 1000)
    await engine.close()
    return outcomes, [(r.revision, r.state_hash, r.applied_patch_json) for r in history.revisions]


@settings(max_examples=60)
@given(writes)
def test_submitting_now_decides_as_submitting_does(sequence: list[tuple[str, int, dict[str, Any], str]]) -> None:
    assert asyncio.run(run(sequence, now=True)) == asyncio.run(run(sequence, now=False))


def test_submitting_now_takes_the_fast_path_where_it_can() -> None:
    async def scenario() -> list[bool]:
        engine = StateEngine(MemoryRevisionLog())
        await engine.start()
        await engine.create_execution("x", json.dumps(SCHEMA), "{}")
        taken = []
        for base, patch in ((0, {"count": 1}), (0, {"tags": ["a"]}), (0, {"owner": "a"}), (0, {"owner": "b"})):
            committing = engine.submit_patch_now("x", "a", base, json.dumps(patch))
            taken.append(committing is not None)
            if committing is not None:
                await committing.durable
        await engine.close()
        return taken

    # a fresh write, merges under counter and set, a first reject write; the stale reject write waits to be
    # refused once what it lost to is durable: that is submit_patch's to do
    assert asyncio.run(scenario()) == [True, True, True, False]


class FailingLog(MemoryRevisionLog):
    """Fails every group commit, as a full disk would."""

    async def commit(self, batch: Batch) -> None:
        raise StorageError("the disk is full")


@pytest.mark.parametrize("log", [MemoryRevisionLog, FailingLog], ids=["committed", "commit failed"])
async def test_a_listener_hears_each_outcome_once_from_the_group_commit(
    log: type[MemoryRevisionLog], caplog: pytest.LogCaptureFixture
) -> None:
    engine = StateEngine(log())
    await engine.start()
    await engine.create_execution("x", "", "")
    heard: dict[str, list[Exception | None]] = {"a": [], "b": [], "c": []}
    durable = []
    for agent in [*heard, "broken"]:  # merged together: one group commit
        committing = engine.submit_patch_now("x", agent, 0, json.dumps({agent: 1}))
        assert committing is not None
        committing.when_durable(heard[agent].append if agent in heard else lambda error: [][0])
        durable.append(committing.durable)
    outcomes = await asyncio.gather(*durable, return_exceptions=True)
    await engine.close()
    failed = log is FailingLog
    assert [len(told) for told in heard.values()] == [1, 1, 1]  # once each, by the time the futures completed
    assert all(isinstance(told[0], StorageError) if failed else told[0] is None for told in heard.values())
    assert all(isinstance(outcome, StorageError) if failed else outcome is None for outcome in outcomes)
    assert "a listener of a group commit's item failed" in caplog.text  # and the commit went on for the others
