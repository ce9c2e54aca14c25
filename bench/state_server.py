"""Benchmark the state server against the raw ceilings of this machine, measured in the same run.

    python bench/state_server.py            # prints a Markdown table (about a minute)
    python bench/state_server.py --quick    # fewer operations, for a smoke run

Each server runs in its own process, the load comes from this one, as in ../shared/FACTS.md. Baselines:
a raw grpc.aio echo server (unary, 64 in flight; and a 100-subscriber fan-out), and raw aiosqlite
single-row commits. Figures are medians of a few rounds; the raw baselines are measured before and after
the state server and averaged, since this machine drifts. Compare the ratios, not absolute rates.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
import grpc

from skillstate.clients import StateClient
from skillstate.clients._client import RetryPolicy

ECHO_SERVER = r"""
import asyncio, grpc, sys
subscribers = set()
async def unary(request, context):
    return request
async def publish(request, context):
    for queue in subscribers:
        queue.put_nowait(request)
    return b""
async def subscribe(request, context):
    queue = asyncio.Queue()
    subscribers.add(queue)
    try:
        while True:
            yield await queue.get()
    finally:
        subscribers.discard(queue)
async def main():
    server = grpc.aio.server()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Publish": grpc.unary_unary_rpc_method_handler(publish),
        "Subscribe": grpc.unary_stream_rpc_method_handler(subscribe),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"serving on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()
asyncio.run(main())
"""

WATCHERS = 100


@dataclass
class Row:
    case: str
    rate: float
    unit: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    baseline: str = ""
    ratio: float | None = None


async def spawn(*args: str) -> tuple[asyncio.subprocess.Process, str, float]:
    """Start a server process; returns it, its address, and seconds until it printed that it serves."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    match = re.search(r"serving on ([\d.]+:\d+)", line)
    if not match:
        raise RuntimeError(f"server did not start: {line!r}")
    return process, match.group(1), time.perf_counter() - started


async def closed_loop(
    operation: Callable[[int], Awaitable[None]], in_flight: int, total: int
) -> tuple[float, list[float]]:
    """Run `total` operations with `in_flight` workers; returns (ops/s, latencies in seconds)."""
    latencies: list[float] = []
    counter = iter(range(total))

    async def worker() -> None:
        for n in counter:
            begun = time.perf_counter()
            await operation(n)
            latencies.append(time.perf_counter() - begun)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return total / (time.perf_counter() - started), latencies


def median_round(rounds: list[tuple[float, list[float]]]) -> tuple[float, float, float]:
    rate = statistics.median(r for r, _ in rounds)
    latencies = sorted(latency for _, lats in rounds for latency in lats)
    return rate, latencies[len(latencies) // 2] * 1e3, latencies[int(len(latencies) * 0.99)] * 1e3


async def raw_echo(address: str, total: int, rounds: int) -> tuple[float, float]:
    async with grpc.aio.insecure_channel(address) as channel:
        unary = channel.unary_unary("/bench.Echo/Unary")
        publish = channel.unary_unary("/bench.Echo/Publish")
        subscribe = channel.unary_stream("/bench.Echo/Subscribe")
        payload = b"x" * 200
        results = []
        for _ in range(rounds):

            async def call(n: int) -> None:
                await unary(payload)

            results.append(await closed_loop(call, 64, total))
        echo_rate = statistics.median(r for r, _ in results)

        async def echo_round() -> tuple[Stream, Send]:
            return (lambda: subscribe(b"")), (lambda n: publish(payload))

        fanout = await measure_fanout(echo_round, total // 10, rounds)
    return echo_rate, fanout


Stream = Callable[[], object]
Send = Callable[[int], Awaitable[object]]


async def measure_fanout(new_round: Callable[[], Awaitable[tuple[Stream, Send]]], messages: int, rounds: int) -> float:
    """Messages per second delivered to every one of WATCHERS streams (sends pipelined 16 at a time)."""
    rates = []
    for _ in range(rounds):
        open_stream, send = await new_round()
        streams = [open_stream() for _ in range(WATCHERS)]
        await asyncio.sleep(0.3)  # let every stream be established
        readers = [asyncio.create_task(_read(stream, messages)) for stream in streams]
        started = time.perf_counter()
        await closed_loop(_discarding(send), 16, messages)
        await asyncio.wait_for(asyncio.gather(*readers), 120)
        rates.append(messages / (time.perf_counter() - started))
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return statistics.median(rates)


async def _read(stream: object, count: int) -> None:
    seen = 0
    async for _ in stream:  # type: ignore[attr-defined]
        seen += 1
        if seen == count:
            return


def _discarding(send: Send) -> Callable[[int], Awaitable[None]]:
    async def call(n: int) -> None:
        await send(n)

    return call


async def raw_sqlite_commits(total: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with aiosqlite.connect(Path(tmp) / "raw.db", isolation_level=None) as db:
            await db.executescript(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (k INTEGER, v TEXT);"
            )
            row = "x" * 1000
            started = time.perf_counter()
            for n in range(total):
                await db.execute("BEGIN")
                await db.execute("INSERT INTO t VALUES (?, ?)", (n, row))
                await db.execute("COMMIT")
            return total / (time.perf_counter() - started)


def _agent_writes(
    client: StateClient, execution: str, patch_of: Callable[[int, int], dict[str, object]], agents: int
) -> Callable[[int], Awaitable[None]]:
    """Agents that submit against the newest revision they know of, as SKILL.state agents that watch do.

    `patch_of(n, hits)` builds patch n from the value of `hits` at that revision (a counter patch carries
    the new value, and the server adds its delta from the base to whatever head holds).
    """
    latest = [0, 0]  # (revision, hits), learned from each reply's effective change

    async def submit(n: int) -> None:
        base, hits = latest
        result = await client.submit_patch(
            execution, patch_of(n, hits), agent_id=f"agent-{n % agents}", base_revision=base
        )
        if result.revision > latest[0]:
            latest[:] = [result.revision, int(result.applied_patch.get("hits", hits))]  # type: ignore[call-overload]

    return submit


async def bench_state_server(address: str, total: int, rounds: int) -> tuple[list[Row], float]:
    rows: list[Row] = []
    async with StateClient(address, retry=RetryPolicy(attempts=1)) as client:
        schema = {"type": "object", "properties": {"hits": {"type": "integer", "x-merge": "counter"}}}
        for agents in (1, 16, 64):
            for shape in ("disjoint keys", "one counter key"):
                results = []
                for _ in range(rounds):
                    execution = (await client.create_execution(schema=schema, initial_state={"hits": 0})).execution_id
                    if shape == "disjoint keys":
                        patch_of: Callable[[int, int], dict[str, object]] = lambda n, hits: {f"k{n}": n}  # noqa: E731
                    else:
                        patch_of = lambda n, hits: {"hits": hits + 1}  # noqa: E731
                    results.append(await closed_loop(_agent_writes(client, execution, patch_of, agents), agents, total))
                rate, p50, p99 = median_round(results)
                rows.append(Row(f"SubmitPatch, {agents} in flight, {shape}", rate, "commits/s", p50, p99))
                print(f"  SubmitPatch {agents:>2} in flight, {shape}: {rate:,.0f} commits/s", file=sys.stderr)

        state_rates = {}
        for label, keys, size in (("1 KB", 10, 100), ("1 MB", 1000, 1000)):
            initial = {f"key{i:04d}": "x" * size for i in range(keys)}
            results = []
            for _ in range(rounds):
                lww = {"type": "object", "x-merge": "lww"}  # agents overwrite each other's keys
                execution = (await client.create_execution(schema=lww, initial_state=initial)).execution_id
                write = _agent_writes(client, execution, lambda n, _, keys=keys: {f"key{n % keys:04d}": f"v{n}"}, 16)
                results.append(await closed_loop(write, 16, total))
            rate, p50, p99 = median_round(results)
            state_rates[label] = rate
            rows.append(Row(f"SubmitPatch on a {label} state, 16 in flight", rate, "commits/s", p50, p99))
            print(f"  SubmitPatch on a {label} state: {rate:,.0f} commits/s", file=sys.stderr)

        async def watch_round() -> tuple[Stream, Send]:
            execution = (await client.create_execution()).execution_id

            async def commit(n: int) -> None:
                await client.submit_patch(execution, {f"k{n}": n}, agent_id="writer", base_revision=0)

            return (lambda: client.watch(execution)), commit

        fanout = await measure_fanout(watch_round, total // 10, rounds)
        rows.append(Row(f"Watch fan-out, {WATCHERS} watchers", fanout, "revisions/s to all"))
        print(f"  watch fan-out: {fanout:,.0f} revisions/s", file=sys.stderr)
    return rows, state_rates["1 MB"] / state_rates["1 KB"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)

    print("measuring the raw grpc.aio echo server...", file=sys.stderr)
    echo, echo_address, _ = await spawn(sys.executable, "-c", ECHO_SERVER)
    try:
        before = await raw_echo(echo_address, total, rounds)
        print(f"  raw echo {before[0]:,.0f} RPC/s, raw fan-out {before[1]:,.0f} broadcasts/s", file=sys.stderr)
        print("measuring raw aiosqlite commits...", file=sys.stderr)
        sqlite_rate = await raw_sqlite_commits(total)
        print("measuring the skillstate state server...", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            cli = [sys.executable, "-m", "skillstate.cli", "serve", "--db", str(Path(tmp) / "bench.db")]
            server, address, startup = await spawn(*cli, "--listen", "127.0.0.1:0", "--log-level", "WARNING")
            try:
                rows, size_ratio = await bench_state_server(address, total, rounds)
            finally:
                server.kill()
                await server.wait()
        print("measuring the raw grpc.aio echo server again (the machine drifts)...", file=sys.stderr)
        after = await raw_echo(echo_address, total, rounds)
    finally:
        echo.kill()
        await echo.wait()
    echo_rate, echo_fanout = statistics.mean((before[0], after[0])), statistics.mean((before[1], after[1]))
    print(f"  raw echo {after[0]:,.0f} RPC/s, raw fan-out {after[1]:,.0f} broadcasts/s", file=sys.stderr)

    for row in rows:
        if row.case.startswith("Watch"):
            row.baseline, row.ratio = f"raw fan-out {echo_fanout:,.0f}/s", row.rate / echo_fanout
        else:
            row.baseline, row.ratio = f"raw echo {echo_rate:,.0f}/s", row.rate / echo_rate
    print("\n| case | rate | p50 ms | p99 ms | baseline (same run) | ratio |")
    print("|---|---|---|---|---|---|")
    print(f"| raw grpc.aio echo, 64 in flight | {echo_rate:,.0f} RPC/s | | | ceiling | 1.00 |")
    print(f"| raw grpc.aio fan-out to {WATCHERS} streams | {echo_fanout:,.0f} broadcasts/s | | | ceiling | 1.00 |")
    print(f"| raw aiosqlite, 1 row per commit | {sqlite_rate:,.0f} commits/s | | | durability reference | |")
    for row in rows:
        latency = f"{row.p50_ms:.2f} | {row.p99_ms:.2f}" if row.p50_ms is not None else " | "
        print(f"| {row.case} | {row.rate:,.0f} {row.unit} | {latency} | {row.baseline} | {row.ratio:.2f} |")
    print(f"\n1 MB state / 1 KB state commit rate: {size_ratio:.2f}; server ready to serve in {startup * 1e3:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
