"""Server memory against executions touched, and cold reads against hot ones, on `skillstate serve` (SQLite).

    python bench/executions.py                                     # 1K, 10K, 100K executions (about 5 minutes)
    python bench/executions.py --sizes 1000 10000 100000 1000000   # and 1M (about 15 minutes more)

The database is filled directly, untimed: each execution with a small state and four revisions (each under an
idempotency key), the rows and hash chains `state create` and four patches would leave. Two servers then run
over copies of it, one after the other:
- ours, `serve --max-loaded-executions CAP` (the default, 10,000);
- the baseline in the same run: the same server with a cap above every size, so it never unloads (as every
  server did before the cap; it stops at 100K, as 1M would take it about 10 GB).
Each touches the executions in order, a GetState each with 64 in flight: every one is a cold read, loading
the execution from the log. After each size it reports its resident memory (VmRSS). Before and after the
cold reads of each size it reads executions it holds in memory at head (hot GetState, 64 in flight, 10,000
calls over the last 1,000 touched): the cold rate beside the mean of the hot ones around it, on the same
server (this machine drifts by up to 2x within minutes). Load goes through the
generated stub, as in bench/state_server.py. Progress goes to stderr; the Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from state_server import closed_loop, spawn

from skillstate.server.engine.execution import genesis_hash, revision_hash
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

IN_FLIGHT = 64
CAP = 10_000
BASELINE_LIMIT = 100_000
HOT_SET = 1_000
HOT_CALLS = 10_000
TARGET_COLD_RATIO = 0.3
CLI = [sys.executable, "-m", "skillstate.cli", "serve", "--listen", "127.0.0.1:0", "--log-level", "ERROR"]

INITIAL = '{"count":0,"owner":"","tags":[]}'
PATCHES = ('{"count":1}', '{"owner":"ada"}', '{"tags":["rush"]}', '{"count":2}')


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def execution_id(n: int) -> str:
    return f"e{n:07d}"


def rows_of(n: int, at: float) -> tuple[tuple[Any, ...], tuple[Any, ...], list[tuple[Any, ...]]]:
    """The executions, snapshots and revisions rows of one execution, its hash chain computed as the engine
    computes it."""
    name = execution_id(n)
    genesis = chain = genesis_hash(name, {}, {"count": 0, "owner": "", "tags": []})
    revisions = []
    for revision, patch in enumerate(PATCHES, start=1):
        chain = revision_hash(chain, revision, "ada", revision - 1, patch, "null")
        revisions.append((name, revision, "ada", revision - 1, patch, patch, "null", f"k{revision}", "[]", chain, at))
    return (name, "{}", at, 0), (name, 0, INITIAL, genesis), revisions


async def fill(path: Path, size: int) -> None:
    """A revision log of `size` executions, written straight into SQLite (the log's own tables)."""
    log = SqliteRevisionLog(path)  # makes the tables
    await log.open()
    await log.close()
    started, at = time.perf_counter(), time.time()
    with sqlite3.connect(path) as database:
        database.execute("PRAGMA synchronous = OFF")
        for first in range(0, size, 10_000):
            executions, snapshots, revisions = [], [], []
            for n in range(first, min(first + 10_000, size)):
                execution, snapshot, its_revisions = rows_of(n, at)
                executions.append(execution)
                snapshots.append(snapshot)
                revisions += its_revisions
            database.executemany("INSERT INTO executions VALUES (?, ?, ?, ?)", executions)
            database.executemany("INSERT INTO snapshots VALUES (?, ?, ?, ?)", snapshots)
            database.executemany(f"INSERT INTO revisions VALUES ({', '.join('?' * 11)})", revisions)
    progress(f"{size:,} executions written in {time.perf_counter() - started:.0f} s")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def touch(stub: pb_grpc.StateServiceStub, first: int, last: int) -> float:
    """GetState on executions first..last-1, in order, 64 in flight; returns reads per second."""

    async def read(worker: int, n: int) -> None:
        await stub.GetState(pb.GetStateRequest(execution_id=execution_id(first + n)))

    rate, _ = await closed_loop(read, IN_FLIGHT, last - first)
    return rate


async def hot(stub: pb_grpc.StateServiceStub, touched: int) -> float:
    """GetState at head on the last HOT_SET executions touched (all in memory), 64 in flight."""
    recent = [execution_id(n) for n in range(max(touched - HOT_SET, 0), touched)]

    async def read(worker: int, n: int) -> None:
        await stub.GetState(pb.GetStateRequest(execution_id=recent[n % len(recent)]))

    rate, _ = await closed_loop(read, IN_FLIGHT, HOT_CALLS)
    return rate


async def measure(db: Path, cap: int, sizes: list[int], label: str) -> list[dict[str, Any]]:
    """Touch the executions up to each size on a server with this cap: its RSS, cold and hot read rates."""
    process, address, _ = await spawn(*CLI, "--db", str(db), "--max-loaded-executions", str(cap))
    rows = []
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.StateServiceStub(channel)
            await stub.GetState(pb.GetStateRequest(execution_id=execution_id(0)))  # connected, warmed
            idle = rss(process.pid)
            touched = 1
            for size in sizes:
                started = time.perf_counter()
                before = await hot(stub, touched)
                cold = await touch(stub, touched, size)
                touched = size
                memory = rss(process.pid)
                hot_rate = (before + await hot(stub, touched)) / 2  # around the cold reads: the machine drifts
                progress(f"{label}: {size:,} touched in {time.perf_counter() - started:.0f} s: cold {cold:,.0f}/s, "
                         f"hot {hot_rate:,.0f}/s, RSS {memory / 2**20:,.0f} MiB")  # fmt: skip
                rows.append({"size": size, "rss": memory, "idle": idle, "cold": cold, "hot": hot_rate})
    finally:
        process.terminate()
        await process.wait()
    return rows


def table(ours: list[dict[str, Any]], baseline: dict[int, dict[str, Any]]) -> str:
    lines = [
        "| executions touched | server RSS, ours (cap 10,000) | RSS, never unloading | cold reads/s | "
        "hot reads/s | cold / hot | baseline cold / hot |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in ours:
        base = baseline.get(row["size"])
        base_rss = f"{base['rss'] / 2**20:,.0f} MiB" if base else "(not run)"
        base_ratio = f"{base['cold'] / base['hot']:.2f}x" if base else ""
        lines.append(
            f"| {row['size']:,} | {row['rss'] / 2**20:,.0f} MiB | {base_rss} | {row['cold']:,.0f} | {row['hot']:,.0f} "
            f"| {row['cold'] / row['hot']:.2f}x | {base_ratio} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    with tempfile.TemporaryDirectory() as folder:
        ours_db, baseline_db = Path(folder, "ours.db"), Path(folder, "baseline.db")
        await fill(ours_db, sizes[-1])
        shutil.copy(ours_db, baseline_db)
        ours = await measure(ours_db, CAP, sizes, "ours")
        baseline_sizes = [size for size in sizes if size <= BASELINE_LIMIT]
        baseline = {row["size"]: row for row in await measure(baseline_db, 10**9, baseline_sizes, "baseline")}
    print(table(ours, baseline))
    print(f"\nServer RSS idle (one execution read): {ours[0]['idle'] / 2**20:,.0f} MiB.")
    worst = min(row["cold"] / row["hot"] for row in ours)
    verdict = "met" if worst >= TARGET_COLD_RATIO else "not met"
    print(f"Cold reads at worst {worst:.2f}x the hot rate (target {TARGET_COLD_RATIO}x: {verdict}).")


if __name__ == "__main__":
    asyncio.run(main())
