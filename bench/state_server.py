"""Benchmark the state server against the raw ceilings of this machine, measured in the same run.

    python bench/state_server.py            # prints a Markdown table (about two minutes)
    python bench/state_server.py --quick    # fewer operations, for a smoke run

Each server runs in its own process; the load comes from this one, as in ../shared/FACTS.md. Baselines: a
raw grpc.aio echo server (unary, 64 in flight; and a 100-subscriber fan-out) and raw aiosqlite single-row
commits. This machine drifts by up to 2x within minutes, so every round of a case is bracketed by a round of
its baseline, and a row's ratio is the median over its rounds of (case rate / mean of the two baseline
rounds around it). Load goes through the generated stub, as the echo load goes through a raw channel, so
both measure the server; one extra row shows the same case through the Python SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite
import grpc
import orjson

from skillstate.clients import StateClient
from skillstate.clients._client import RetryPolicy
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

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
ECHO_IN_FLIGHT = 64

Operation = Callable[[int, int], Awaitable[None]]
"""An operation of the closed loop: (worker, sequence number)."""


@dataclass
class Row:
    case: str
    unit: str
    rates: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    baselines: list[float] = field(default_factory=list)


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


async def closed_loop(operation: Operation, in_flight: int, total: int) -> tuple[float, list[float]]:
    """Run `total` operations with `in_flight` workers; returns (ops/s, latencies in seconds)."""
    latencies: list[float] = []
    counter = iter(range(total))

    async def worker(index: int) -> None:
        for n in counter:
            begun = time.perf_counter()
            await operation(index, n)
            latencies.append(time.perf_counter() - begun)

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(in_flight)))
    return total / (time.perf_counter() - started), latencies


class Echo:
    """The raw ceilings: a grpc.aio server that echoes bytes, and fans one message out to many streams."""

    def __init__(self, channel: grpc.aio.Channel, total: int) -> None:
        self._unary = channel.unary_unary("/bench.Echo/Unary")
        self._publish = channel.unary_unary("/bench.Echo/Publish")
        self._subscribe = channel.unary_stream("/bench.Echo/Subscribe")
        self._total = total

    async def unary_rate(self) -> float:
        payload = b"x" * 200

        async def call(worker: int, n: int) -> None:
            await self._unary(payload)

        rate, _ = await closed_loop(call, ECHO_IN_FLIGHT, self._total)
        return rate

    async def fanout_rate(self) -> float:
        async def publish(n: int) -> None:
            await self._publish(b"x" * 200)

        return await measure_fanout(lambda: self._subscribe(b""), publish, self._total // 10)


@contextlib.asynccontextmanager
async def running_echo(total: int) -> AsyncIterator[Echo]:
    """The raw echo server in its own process, and a warmed-up client of it."""
    process, address, _ = await spawn(sys.executable, "-c", ECHO_SERVER)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            echo = Echo(channel, total)
            await echo.unary_rate()  # warm up both sides
            yield echo
    finally:
        process.kill()
        await process.wait()


async def measure_fanout(
    open_stream: Callable[[], object], send: Callable[[int], Awaitable[object]], count: int
) -> float:
    """Messages per second delivered to every one of WATCHERS streams (sends pipelined 16 at a time)."""
    streams = [open_stream() for _ in range(WATCHERS)]
    await asyncio.sleep(0.3)  # let every stream be established
    readers = [asyncio.create_task(_read(stream, count)) for stream in streams]

    async def call(worker: int, n: int) -> None:
        await send(n)

    started = time.perf_counter()
    await closed_loop(call, 16, count)
    await asyncio.wait_for(asyncio.gather(*readers), 120)
    rate = count / (time.perf_counter() - started)
    for stream in streams:  # a raw call is cancelled; the SDK's watch is an async generator, closed
        await stream.aclose() if hasattr(stream, "aclose") else stream.cancel()  # type: ignore[attr-defined]
    return rate


async def _read(stream: object, count: int) -> None:
    seen = 0
    async for _ in stream:  # type: ignore[attr-defined]
        seen += 1
        if seen == count:
            return


async def bracketed(row: Row, baseline: Callable[[], Awaitable[float]], case: Awaitable[object]) -> None:
    """One round of a case between two rounds of its baseline; appends the rate and the ratio to row."""
    before = await baseline()
    result = await case
    rate, latencies = result if isinstance(result, tuple) else (result, [])
    after = await baseline()
    row.rates.append(rate)
    row.latencies.extend(latencies)
    row.baselines.append((before + after) / 2)
    row.ratios.append(rate / row.baselines[-1])


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


PatchOf = Callable[[int, int, int], dict[str, object]]
"""(agent, sequence number, value of `hits` at the base) -> the patch to submit."""


def disjoint_keys(agent: int, n: int, hits: int) -> dict[str, object]:
    return {f"agent-{agent}": n}  # each agent writes its own member: concurrent, never overlapping


def one_counter(agent: int, n: int, hits: int) -> dict[str, object]:
    return {"hits": hits + 1}  # the server adds the delta from the base to whatever head holds


class Agents:
    """Agents that submit against the newest revision they know, as SKILL.state agents that watch do."""

    def __init__(self, stub: pb_grpc.StateServiceStub, client: StateClient) -> None:
        self._stub = stub
        self._client = client

    async def create(self, schema: dict[str, object], initial: dict[str, object]) -> str:
        return (await self._client.create_execution(schema=schema, initial_state=initial)).execution_id

    def through_stub(self, execution: str, patch_of: PatchOf) -> Operation:
        latest = [0, 0]  # (revision, hits), learned from each reply's effective change

        async def submit(agent: int, n: int) -> None:
            base, hits = latest
            request = pb.SubmitPatchRequest(
                execution_id=execution,
                agent_id=f"agent-{agent}",
                base_revision=base,
                patch_json=orjson.dumps(patch_of(agent, n, hits)).decode(),
            )
            reply = await self._stub.SubmitPatch(request)
            if reply.revision > latest[0]:
                latest[:] = [reply.revision, orjson.loads(reply.applied_patch_json).get("hits", hits)]

        return submit

    def text_editor(self, execution: str, doc: str) -> Operation:
        """Agents that each insert a line of their own into the newest text they know: every write in flight
        with another is a three-way text merge on the server."""
        latest: list[object] = [0, doc]

        async def edit(agent: int, n: int) -> None:
            base, text = latest
            assert isinstance(base, int) and isinstance(text, str)
            at = text.find("\n", (n * 7919) % max(len(text), 1)) + 1
            request = pb.SubmitPatchRequest(
                execution_id=execution,
                agent_id=f"agent-{agent}",
                base_revision=base,
                patch_json=orjson.dumps({"doc": f"{text[:at]}agent-{agent} edit {n}\n{text[at:]}"}).decode(),
            )
            reply = await self._stub.SubmitPatch(request)
            merged = orjson.loads(reply.applied_patch_json).get("doc")
            if reply.revision > latest[0] and isinstance(merged, str):  # type: ignore[operator]
                latest[:] = [reply.revision, merged]

        return edit

    def through_sdk(self, execution: str, patch_of: PatchOf) -> Operation:
        latest = [0, 0]

        async def submit(agent: int, n: int) -> None:
            base, hits = latest
            result = await self._client.submit_patch(
                execution, patch_of(agent, n, hits), agent_id=f"agent-{agent}", base_revision=base
            )
            if result.revision > latest[0]:
                latest[:] = [result.revision, int(result.applied_patch.get("hits", hits))]  # type: ignore[call-overload]

        return submit


COUNTER_SCHEMA = {"type": "object", "properties": {"hits": {"type": "integer", "x-merge": "counter"}}}


async def bench_state_server(address: str, echo: Echo, total: int, rounds: int) -> tuple[list[Row], float]:
    rows: list[Row] = []
    async with (
        StateClient(address, retry=RetryPolicy(attempts=1)) as client,
        grpc.aio.insecure_channel(address) as channel,
    ):
        agents = Agents(pb_grpc.StateServiceStub(channel), client)

        async def run(row: Row, in_flight: int, make: Callable[[str], Operation], initial: dict[str, object]) -> None:
            for _ in range(rounds):
                execution = await agents.create(COUNTER_SCHEMA, initial)
                await bracketed(row, echo.unary_rate, closed_loop(make(execution), in_flight, total))
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)

        for in_flight in (1, 16, 64):
            for shape, patch_of in (("disjoint keys", disjoint_keys), ("one counter key", one_counter)):
                row = Row(f"SubmitPatch, {in_flight} in flight, {shape}", "commits/s")
                await run(row, in_flight, lambda e, p=patch_of: agents.through_stub(e, p), {"hits": 0})  # type: ignore[misc]
        sdk = Row("SubmitPatch, 64 in flight, disjoint keys, through the Python SDK", "commits/s")
        await run(sdk, 64, lambda e: agents.through_sdk(e, disjoint_keys), {"hits": 0})

        for label, keys, size in (("1 KB", 10, 100), ("1 MB", 1000, 1000)):
            initial: dict[str, object] = {f"key{i:04d}": "x" * size for i in range(keys)}

            def overwrite(agent: int, n: int, hits: int, keys: int = keys) -> dict[str, object]:
                return {f"key{(agent * 7 + n) % keys:04d}": f"v{n}"}  # agents overwrite each other's keys

            row = Row(f"SubmitPatch on a {label} state, 16 in flight", "commits/s")
            lww = {"type": "object", "x-merge": "lww"}
            for _ in range(rounds):
                execution = await agents.create(lww, initial)
                write = agents.through_stub(execution, overwrite)
                await bracketed(row, echo.unary_rate, closed_loop(write, 16, total))
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
        size_ratio = statistics.median(rows[-1].ratios) / statistics.median(rows[-2].ratios)  # each to its echo

        text_schema = {"type": "object", "properties": {"doc": {"type": "string", "x-merge": "text"}}}
        for label, size, edits in (
            ("1 KB", 1_000, total // 3),
            ("100 KB", 100_000, total // 10),
            ("1 MB", 1_000_000, 20),
        ):
            row = Row(f"SubmitPatch, text merges of a {label} string, 4 in flight", "commits/s")
            for _ in range(rounds):
                lines = [f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(size // 50 + 1)]
                doc = "".join(lines)[:size]
                execution = await agents.create(text_schema, {"doc": doc})
                await bracketed(row, echo.unary_rate, closed_loop(agents.text_editor(execution, doc), 4, edits))
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)

        fanout = Row(f"Watch fan-out, {WATCHERS} watchers", "revisions/s to all")
        for _ in range(rounds):
            execution = await agents.create({}, {})

            async def commit(n: int, execution: str = execution) -> None:
                await client.submit_patch(execution, {f"k{n}": n}, agent_id="writer", base_revision=0)

            watch = functools.partial(client.watch, execution)
            await bracketed(fanout, echo.fanout_rate, measure_fanout(watch, commit, total // 10))
        rows.append(fanout)
        print(f"  {fanout.case}: {statistics.median(fanout.rates):,.0f} {fanout.unit}", file=sys.stderr)
    return rows, size_ratio


def table(rows: list[Row], echo: float, fanout: float, sqlite_rate: float) -> str:
    lines = [
        "| case | rate | p50 ms | p99 ms | baseline (bracketing rounds) | ratio |",
        "|---|---|---|---|---|---|",
        f"| raw grpc.aio echo, {ECHO_IN_FLIGHT} in flight | {echo:,.0f} RPC/s | | | ceiling | 1.00 |",
        f"| raw grpc.aio fan-out to {WATCHERS} streams | {fanout:,.0f} broadcasts/s | | | ceiling | 1.00 |",
        f"| raw aiosqlite, 1 row per commit | {sqlite_rate:,.0f} commits/s | | | durability reference | |",
    ]
    for row in rows:
        latency = " | "
        if row.latencies:
            ordered = sorted(row.latencies)
            latency = f"{ordered[len(ordered) // 2] * 1e3:.2f} | {ordered[int(len(ordered) * 0.99)] * 1e3:.2f}"
        kind = "raw fan-out" if row.case.startswith("Watch") else "raw echo"
        baseline = f"{kind} {statistics.median(row.baselines):,.0f}/s"
        lines.append(
            f"| {row.case} | {statistics.median(row.rates):,.0f} {row.unit} | {latency} | {baseline} "
            f"| {statistics.median(row.ratios):.2f} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)

    async with running_echo(total) as echo:
        print("measuring raw aiosqlite commits...", file=sys.stderr)
        sqlite_rate = await raw_sqlite_commits(total)
        print("measuring the state server, each round between two rounds of its baseline...", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            cli = [sys.executable, "-m", "skillstate.cli", "serve", "--db", str(Path(tmp) / "bench.db")]
            server, address, startup = await spawn(*cli, "--listen", "127.0.0.1:0", "--log-level", "WARNING")
            try:
                rows, size_ratio = await bench_state_server(address, echo, total, rounds)
            finally:
                server.kill()
                await server.wait()

    echo_rate = statistics.median(b for row in rows if not row.case.startswith("Watch") for b in row.baselines)
    fanout_rate = statistics.median(rows[-1].baselines)
    print()
    print(table(rows, echo_rate, fanout_rate, sqlite_rate))
    print(f"\n1 MB state / 1 KB state commit rate (their ratios to echo): {size_ratio:.2f}; "
          f"server ready to serve in {startup * 1e3:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
