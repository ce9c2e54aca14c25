"""Scale-out: SubmitPatch on one SQLite server, on one replica over PostgreSQL, and on three replicas over the
same PostgreSQL, each with many executions and with one hot execution, in one run.

    python bench/scale_out.py --db postgresql://user:pass@127.0.0.1/db      # about two minutes
    python bench/scale_out.py --db "$(scripts/postgres_for_tests.sh)" --quick

Every server is `skillstate serve` in its own process; the PostgreSQL configurations get a fresh schema
each (`?search_path=`). The load is 64 calls in flight through the generated stub, spread round-robin over
the replicas: "many executions" gives each of the 64 agents its own execution, "one hot execution" has all
of them write their own member of one execution (so every replica's commits race for the same revision
numbers). Every round is bracketed by the raw grpc.aio echo, as in bench/state_server.py. This machine has
2 cores shared by the load, the replicas and PostgreSQL, so the three-replica rows show what replicas cost
here, not what they add on machines of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

import grpc
from postgres_schema import new_schema
from state_server import Echo, Operation, Row, bracketed, closed_loop, running_echo, spawn

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

IN_FLIGHT = 64
CLI = [sys.executable, "-m", "skillstate.cli", "serve", "--listen", "127.0.0.1:0", "--log-level", "ERROR"]


def submit(stubs: list[pb_grpc.StateServiceStub], executions: list[str]) -> Operation:
    """Agent i writes its own member of execution i % len(executions), through replica i % len(stubs)."""
    latest = dict.fromkeys(executions, 0)

    async def call(agent: int, n: int) -> None:
        execution = executions[agent % len(executions)]
        request = pb.SubmitPatchRequest(
            execution_id=execution,
            agent_id=f"agent-{agent}",
            base_revision=latest[execution],
            patch_json=f'{{"a{agent}":{n}}}',
        )
        reply = await stubs[agent % len(stubs)].SubmitPatch(request)
        latest[execution] = max(latest[execution], reply.revision)

    return call


def get_state(stubs: list[pb_grpc.StateServiceStub], execution: str) -> Operation:
    async def call(agent: int, n: int) -> None:
        await stubs[agent % len(stubs)].GetState(pb.GetStateRequest(execution_id=execution))

    return call


async def measure(label: str, db: str, replicas: int, echo: Echo, total: int, rounds: int) -> list[Row]:
    servers = [await spawn(*CLI, "--db", db) for _ in range(replicas)]
    channels = [grpc.aio.insecure_channel(address) for _, address, _ in servers]
    stubs = [pb_grpc.StateServiceStub(channel) for channel in channels]
    rows = [Row(f"{label}, many executions", "commits/s"), Row(f"{label}, one hot execution", "commits/s")]
    reads = Row(f"{label}, GetState at head", "reads/s")
    try:
        for row, spread in zip(rows, (IN_FLIGHT, 1), strict=True):
            for _ in range(rounds):
                executions = [f"x-{uuid.uuid4().hex[:8]}" for _ in range(spread)]
                for execution in executions:
                    await stubs[0].CreateExecution(pb.CreateExecutionRequest(execution_id=execution))
                await bracketed(row, echo.unary_rate, closed_loop(submit(stubs, executions), IN_FLIGHT, total))
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
        for _ in range(rounds):  # a read at head catches up from the database first when replicas share it
            await bracketed(reads, echo.unary_rate, closed_loop(get_state(stubs, executions[0]), IN_FLIGHT, total))
        print(f"  {reads.case}: {statistics.median(reads.rates):,.0f} {reads.unit}", file=sys.stderr)
        rows.append(reads)
    finally:
        for channel in channels:
            await channel.close()
        for process, _, _ in servers:
            process.kill()
            await process.wait()
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a PostgreSQL URL (each configuration gets its own schema)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)
    rows: list[Row] = []
    started = time.perf_counter()
    async with running_echo(total) as echo:
        with TemporaryDirectory() as tmp:
            rows += await measure("SQLite, one server", str(Path(tmp) / "bench.db"), 1, echo, total, rounds)
        for label, replicas in (("PostgreSQL, one replica", 1), ("PostgreSQL, three replicas", 3)):
            url = await new_schema(args.db, f"bench_{uuid.uuid4().hex[:10]}")
            rows += await measure(label, url, replicas, echo, total, rounds)
    print(f"\n({time.perf_counter() - started:.0f} s)\n")
    print("| configuration | rate | p50 ms | p99 ms | raw echo (bracketing rounds) | ratio to echo |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        ordered = sorted(row.latencies)
        print(f"| {row.case} | {statistics.median(row.rates):,.0f} {row.unit} | {ordered[len(ordered) // 2] * 1e3:.2f} "
              f"| {ordered[int(len(ordered) * 0.99)] * 1e3:.2f} | {statistics.median(row.baselines):,.0f}/s "
              f"| {statistics.median(row.ratios):.2f} |")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
