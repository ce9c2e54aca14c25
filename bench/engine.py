"""Benchmark the engine alone (no gRPC): durable commits/s with concurrent writers, wide objects, memory.

    python bench/engine.py            # about two minutes
    python bench/engine.py --quick    # fewer patches, one round

Baselines in the same run: raw aiosqlite commits of one row each (what a naive commit-per-patch costs),
each round on SQLite between two rounds of them, its ratio the median over rounds of its rate to the mean
of the two around it (as in bench/state_server.py); for memory, the size of the state itself (what any
server holding the state must spend). Rows on the in-memory log are not durable and get no ratio.
"""

from __future__ import annotations

import argparse
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
from state_server import Row, bracketed, raw_sqlite_commits


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer patches and one round, for a smoke run")
    args = parser.parse_args()
    total, rounds, raw_total, patches = (2_000, 1, 1_000, 200) if args.quick else (20_000, 3, 5_000, 2_000)

    async def raw() -> float:
        return await raw_sqlite_commits(raw_total)

    print("measuring, each round on SQLite between two rounds of raw aiosqlite commits...", file=sys.stderr)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for writers in (1, 64):
            for name in ("memory", "sqlite"):
                row = Row(f"engine, {writers} writer(s), {name} log", "commits/s")
                for round_ in range(rounds):
                    path = Path(tmp) / f"{name}-{writers}-{round_}.db"
                    log = MemoryRevisionLog() if name == "memory" else SqliteRevisionLog(path)
                    case = concurrent_writers(log, writers, total // (10 if writers == 1 else 1))
                    if name == "sqlite":  # durable, as the baseline is: the ratio says what group commit buys
                        await bracketed(row, raw, case)
                    else:
                        row.rates.append(await case)
                rows.append(row)
    for members in (10, 1_000, 10_000, 50_000):
        row = Row(f"engine, one object of {members:,} members, one written per patch", "commits/s")
        row.rates = [await wide_object(members, total // 4) for _ in range(rounds)]
        rows.append(row)
    baselines = [b for row in rows for b in row.baselines]
    print("| case | commits/s | raw aiosqlite (bracketing rounds) | ratio to raw aiosqlite |\n|---|---|---|---|")
    print(f"| raw aiosqlite, 1 row per commit (baseline) | {statistics.median(baselines):,.0f} | | 1.00 |")
    for row in rows:
        rate = f"{statistics.median(row.rates):,.0f}"
        if row.ratios:
            print(f"| {row.case} | {rate} | {statistics.median(row.baselines):,.0f}/s | "
                  f"{statistics.median(row.ratios):.2f} |")  # fmt: skip
        else:
            print(f"| {row.case} | {rate} | | |")
    print(f"\n| memory after {patches:,} patches to one object | engine holds (MiB) | the state alone (MiB) | ratio |")
    print("|---|---|---|---|")
    for members in (1_000, 50_000):
        with tempfile.TemporaryDirectory() as tmp:
            held, alone = await memory_held(Path(tmp) / "memory.db", members, patches)
            print(f"| {members:,} members | {held:.1f} | {alone:.1f} | {held / alone:.2f} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
