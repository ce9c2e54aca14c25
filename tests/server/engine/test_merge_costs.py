"""What a merge reads follows the patch and the writes to its own paths since its base, never the history.

Costs are counted, not timed: every read of the path index (a child looked up, a child written since the
base, a version of a path scanned) during one stale submit, with a history ten times longer around the
same writes. A merge that replayed anything of the history, or walked the members of the map the patch
writes into, would read more the longer the history.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.paths import PathNode
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

HOT = 64
"""Members of the map written in turn: with a lag of 256, the patch's member was written 4 times since. The
histories are multiples of 5 x HOT long, so both leave the same values where the patch writes."""
LAG = 256


@contextlib.contextmanager
def counted_reads() -> Iterator[list[int]]:
    """Counts every read of the path index while the block runs."""
    reads = [0]
    child, written_since, first_write_after = PathNode.child, PathNode.written_since, PathNode.first_write_after

    def counting_child(self: PathNode, key: str) -> PathNode | None:
        reads[0] += 1
        return child(self, key)

    def counting_written_since(self: PathNode, base: int) -> Iterator[PathNode]:
        for node in written_since(self, base):
            reads[0] += 1
            yield node

    def counting_first_write_after(self: PathNode, base: int, until: int | None = None) -> tuple[int, Any] | None:
        found = first_write_after(self, base, until)
        first, end = self.writes_after(base, until)
        scanned = end - first if found is None else bisect.bisect_left(self.revisions, found[0]) - first + 1  # type: ignore[arg-type]
        reads[0] += 1 + scanned
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PathNode, "child", counting_child)
        patch.setattr(PathNode, "written_since", counting_written_since)
        patch.setattr(PathNode, "first_write_after", counting_first_write_after)
        yield reads


def value(policy: str, n: int, before: Any) -> Any:
    """What a writer puts in a member it read as `before`, under each policy."""
    if policy == "append":
        return [*(before or []), n]
    if policy == "text":
        return f"{before or ''}line {n}\n"
    if policy == "set":
        return [n % 5, 7]
    return {"lww": f"v{n}", "counter": n, "max": n, "min": -n}[policy]


async def stale_merge_reads(policy: str, history: int, base_of_last: int | None = None) -> tuple[int, Any]:
    """Reads of one stale patch's merge after `history` revisions written in turn to HOT members of one map
    (each on head), on a base LAG revisions back (or `base_of_last`); and its resolutions."""
    engine = StateEngine(MemoryRevisionLog(), EngineConfig(snapshot_every=10**9))
    await engine.start()
    try:
        schema = {"type": "object", "properties": {"m": {"additionalProperties": {"x-merge": policy}}}}
        await engine.create_execution("x", json.dumps(schema), json.dumps({"m": {}}))
        members: dict[str, Any] = {}
        for n in range(history):
            key = f"k{n % HOT}"
            members[key] = value(policy, n, members.get(key))
            await engine.submit_patch("x", "writer", n, json.dumps({"m": {key: members[key]}}))
        base = history - LAG if base_of_last is None else base_of_last
        at_base = json.loads((await engine.get_state("x", base)).state_json)["m"].get("k0")
        patch = json.dumps({"m": {"k0": value(policy, history, at_base)}})
        with counted_reads() as reads:
            result = await engine.submit_patch("x", "late", base, patch)
        assert result.resolutions, "the patch must meet the writes of its member since its base"
        return reads[0], [r.outcome for r in result.resolutions]
    finally:
        await engine.close()


@pytest.mark.parametrize("policy", ["lww", "counter", "max", "min", "set", "append", "text"])
def test_a_stale_merge_reads_the_same_whatever_the_length_of_the_history(policy: str) -> None:
    short = asyncio.run(stale_merge_reads(policy, 1_280))
    long = asyncio.run(stale_merge_reads(policy, 12_800))
    assert short == long, f"{policy}: {short[0]} reads after 1,280 revisions, {long[0]} after 12,800"
    assert short[0] <= 8 + 2 * (LAG // HOT), f"{policy}: {short[0]} reads for a patch of one member"


@pytest.mark.parametrize("policy", ["counter", "set", "append"])
def test_a_base_at_the_start_of_a_long_history_is_found_by_bisection(policy: str) -> None:
    """Its member was written 1,280 and 12,800 / HOT times since base 0: its value at the base is the one the
    first of those writes replaced, found without reading the others."""
    short = asyncio.run(stale_merge_reads(policy, 1_280, base_of_last=0))
    long = asyncio.run(stale_merge_reads(policy, 12_800, base_of_last=0))
    assert short == long and short[0] <= 8, f"{policy}: {short[0]} reads, then {long[0]}"
