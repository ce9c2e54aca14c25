"""Benchmark the engine alone (no gRPC): durable commits/s with concurrent writers, wide objects, memory.

    python bench/engine.py

Baselines in the same run: raw aiosqlite commits of one row each (what a naive commit-per-patch costs),
and for memory, the size of the state itself (what any server holding the state must spend).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.storage.revision_log.base import RevisionLog
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

sys.path.insert(0, str(Path(__file__).parent))
from state_server import raw_sqlite_commits


async def concurrent_writers(log: RevisionLog, writers: int, total: int) -> float:
    """Writers that each submit against the newest revision seen, 500 distinct keys."""
    engine = StateEngine(log)
    await engine.start()
    await engine.create_execution("x", "", "{}")
    latest = [0]
    numbers = iter(range(total))

    async def writer(agent: int) -> None:
        for n in numbers:
            result = await engine.submit_patch("x", f"agent-{agent}", latest[0], json.dumps({f"k{n % 500}": n}))
            latest[0] = max(latest[0], result.revision)

    started = time.perf_counter()
    await asyncio.gather(*(writer(a) for a in range(writers)))
    rate = total / (time.perf_counter() - started)
    await engine.close()
    return rate


async def wide_object(members: int, total: int) -> float:
    """One writer, one member written per patch, in an object of `members` members."""
    engine = StateEngine(MemoryRevisionLog())
    await engine.start()
    await engine.create_execution("x", "", "{}")
    for start in range(0, members, 5000):  # grown by patches: the initial state is limited to 1 MiB
        chunk = {f"k{i}": i for i in range(start, min(members, start + 5000))}
        await engine.submit_patch("x", "setup", await engine.head_revision("x"), json.dumps(chunk))
    started = time.perf_counter()
    for n in range(total):
        await engine.submit_patch("x", "a", await engine.head_revision("x"), json.dumps({f"k{n % members}": -n}))
    rate = total / (time.perf_counter() - started)
    await engine.close()
    return rate


async def memory_held(path: Path, members: int, patches: int) -> tuple[float, float]:
    """MiB the engine holds for one execution (head, window, indexes) after `patches` patches to an object of
    `members` members, beside the MiB of a copy of that state alone. Measured with tracemalloc, which does not
    see SQLite's own page cache."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    engine = StateEngine(SqliteRevisionLog(path))
    await engine.start()
    await engine.create_execution("x", "", "{}")
    for start in range(0, members, 5000):
        chunk = {f"k{i}": i for i in range(start, min(members, start + 5000))}
        await engine.submit_patch("x", "setup", await engine.head_revision("x"), json.dumps(chunk))
    for n in range(patches):
        await engine.submit_patch("x", "a", await engine.head_revision("x"), json.dumps({f"k{n % members}": -n}))
    held = tracemalloc.get_traced_memory()[0] - before
    state_json = (await engine.get_state("x")).state_json
    mark = tracemalloc.get_traced_memory()[0]
    state = orjson.loads(state_json)
    alone = tracemalloc.get_traced_memory()[0] - mark
    tracemalloc.stop()
    del state
    await engine.close()
    return held / 2**20, alone / 2**20


async def main() -> None:
    total = 20_000
    print("raw aiosqlite commits...", file=sys.stderr)
    raw = await raw_sqlite_commits(5_000)
    print("| case | commits/s |\n|---|---|")
    print(f"| raw aiosqlite, 1 row per commit (baseline) | {raw:,.0f} |")
    with tempfile.TemporaryDirectory() as tmp:
        for writers in (1, 64):
            for name in ("memory", "sqlite"):
                rates = []
                for round_ in range(3):
                    path = Path(tmp) / f"{name}-{writers}-{round_}.db"
                    log = MemoryRevisionLog() if name == "memory" else SqliteRevisionLog(path)
                    rates.append(await concurrent_writers(log, writers, total // (10 if writers == 1 else 1)))
                print(f"| engine, {writers} writer(s), {name} log | {statistics.median(rates):,.0f} |", flush=True)
    for members in (10, 1_000, 10_000, 50_000):
        rate = statistics.median([await wide_object(members, 5_000) for _ in range(3)])
        print(f"| engine, one object of {members:,} members, one written per patch | {rate:,.0f} |", flush=True)
    print("\n| memory after 2,000 patches to one object | engine holds (MiB) | the state alone (MiB) | ratio |")
    print("|---|---|---|---|")
    for members in (1_000, 50_000):
        with tempfile.TemporaryDirectory() as tmp:
            held, alone = await memory_held(Path(tmp) / "memory.db", members, 2_000)
            print(f"| {members:,} members | {held:.1f} | {alone:.1f} | {held / alone:.2f} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
