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
import collections
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

from skillstate.clients import RetryPolicy, StateClient
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
async def bidi(requests, context):
    async for request in requests:
        yield request
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
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
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
SESSION_SHAPES = ((64, 1), (8, 8), (1, 64))
"""(streams, submits in flight on each): the same 64 in flight as the unary echo, spread three ways."""
SESSION_ROUNDS = 5
"""Rounds of each session row (3 for the others): a session round lasts a third of a second, so the echo
rounds around it vary more than the case does, and a median of five holds against one fast echo round."""

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
    stream_baselines: list[float] = field(default_factory=list)
    """For session rows: the raw bidi echo of the same shape, bracketing each round too."""
    stream_ratios: list[float] = field(default_factory=list)


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
        self._bidi = channel.stream_stream("/bench.Echo/Bidi")
        self._total = total

    async def unary_rate(self) -> float:
        payload = b"x" * 200

        async def call(worker: int, n: int) -> None:
            await self._unary(payload)

        rate, _ = await closed_loop(call, ECHO_IN_FLIGHT, self._total)
        return rate

    async def bidi_rate(self, streams: int, in_flight: int) -> float:
        """Messages/s echoed over `streams` bidi streams with `in_flight` pipelined on each. Each message is a
        session's submit, as the session rows send (their replies are about twice its size)."""
        request = _session_submit(1, "agent-0", 0, {"agent-0-0": 1}).SerializeToString()

        async def send(call: grpc.aio.StreamStreamCall, n: int) -> None:
            await call.write(request)

        rate, _ = await pipelined_streams(lambda: self._bidi(), send, streams, in_flight, self._total)
        return rate

    async def fanout_rate(self) -> float:
        async def publish(n: int) -> None:
            await self._publish(b"x" * 200)

        return await measure_fanout(lambda: self._subscribe(b""), publish, self._total // 10)


async def pipelined_streams(
    open_stream: Callable[[], grpc.aio.StreamStreamCall],
    write: Callable[[grpc.aio.StreamStreamCall, int], Awaitable[None]],
    streams: int,
    in_flight: int,
    total: int,
    first: Callable[[grpc.aio.StreamStreamCall], Awaitable[None]] | None = None,
    on_reply: Callable[[object], None] | None = None,
) -> tuple[float, list[float]]:
    """`total` messages over `streams` streams, each keeping `in_flight` written and unanswered: a reply
    read lets the next message be written. Returns (replies/s, seconds from each write to its reply)."""
    per_stream = total // streams
    latencies: list[float] = []

    async def drive(call: grpc.aio.StreamStreamCall) -> None:
        sent: collections.deque[float] = collections.deque()
        written = 0
        while written < min(in_flight, per_stream):
            sent.append(time.perf_counter())
            await write(call, written)
            written += 1
        for _ in range(per_stream):
            message = await call.read()
            assert message is not grpc.aio.EOF, "the stream ended early"
            if on_reply is not None:
                on_reply(message)
            latencies.append(time.perf_counter() - sent.popleft())
            if written < per_stream:
                sent.append(time.perf_counter())
                await write(call, written)
                written += 1

    calls = [open_stream() for _ in range(streams)]
    if first is not None:
        await asyncio.gather(*(first(call) for call in calls))
    started = time.perf_counter()
    await asyncio.gather(*(drive(call) for call in calls))
    rate = per_stream * streams / (time.perf_counter() - started)
    for call in calls:
        call.cancel()
    return rate, latencies


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


def counter_from_zero(agent: int, n: int, hits: int) -> dict[str, object]:
    return {"hits": 1}  # written on base 0, where hits was 0: a delta of 1 whatever the history since


def lww_map(agent: int, n: int, hits: int) -> dict[str, object]:
    return {"m": {f"agent-{agent}": n}}  # each agent its own member of one map, merged by its stamps


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
            if patch_of is counter_from_zero:
                base, hits = 0, 0
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


def _session_submit(sequence: int, agent: str, base: int, patch: dict[str, object]) -> pb.SessionRequest:
    request = pb.SubmitPatchRequest(base_revision=base, patch_json=orjson.dumps(patch).decode())
    return pb.SessionRequest(submit=pb.SessionSubmit(sequence=sequence, patch=request))


class Sessions:
    """Agents that each submit over a Session stream, against the newest revision any of them learned."""

    def __init__(self, stub: pb_grpc.StateServiceStub) -> None:
        self._stub = stub

    async def rate(
        self, execution: str, streams: int, in_flight: int, total: int, shape: str = "disjoint keys"
    ) -> tuple[float, list[float]]:
        """`shape`: "disjoint keys" (each slot a top-level key of its own), "one counter from base 0", or "one
        lww map" (each slot its own member, base = the newest revision seen)."""
        latest = [0]
        agents: dict[grpc.aio.StreamStreamCall, str] = {}

        def open_stream() -> grpc.aio.StreamStreamCall:
            call = self._stub.Session()
            agents[call] = f"agent-{len(agents)}"
            return call

        async def opened(call: grpc.aio.StreamStreamCall) -> None:
            opening = pb.SessionOpen(execution_id=execution, agent_id=agents[call])
            await call.write(pb.SessionRequest(open=opening))
            assert (await call.read()).WhichOneof("kind") == "progress"

        async def submit(call: grpc.aio.StreamStreamCall, n: int) -> None:
            agent = agents[call]  # each of its slots writes a member of its own: concurrent, never overlapping
            member = f"{agent}-{n % in_flight}"
            if shape == "one counter from base 0":
                await call.write(_session_submit(n + 1, agent, 0, {"hits": 1}))
            elif shape == "one lww map":
                await call.write(_session_submit(n + 1, agent, latest[0], {"m": {member: n}}))
            else:
                await call.write(_session_submit(n + 1, agent, latest[0], {member: n}))

        def answered(message: object) -> None:
            assert isinstance(message, pb.SessionResponse)
            result = message.result
            if not result.HasField("response"):
                raise RuntimeError(f"a session submit was refused: {result.error.message}")
            latest[0] = max(latest[0], result.response.revision)

        return await pipelined_streams(open_stream, submit, streams, in_flight, total, first=opened, on_reply=answered)


async def bracketed_session(
    row: Row, echo: Echo, streams: int, in_flight: int, case: Callable[[], Awaitable[tuple[float, list[float]]]]
) -> None:
    """One round between rounds of both baselines: the unary echo at 64 in flight and the bidi echo of the
    same shape."""
    unary_before, bidi_before = await echo.unary_rate(), await echo.bidi_rate(streams, in_flight)
    rate, latencies = await case()
    unary_after, bidi_after = await echo.unary_rate(), await echo.bidi_rate(streams, in_flight)
    row.rates.append(rate)
    row.latencies.extend(latencies)
    row.baselines.append((unary_before + unary_after) / 2)
    row.ratios.append(rate / row.baselines[-1])
    row.stream_baselines.append((bidi_before + bidi_after) / 2)
    row.stream_ratios.append(rate / row.stream_baselines[-1])


COUNTER_SCHEMA = {
    "type": "object",
    "properties": {
        "hits": {"type": "integer", "x-merge": "counter"},
        "m": {"type": "object", "additionalProperties": {"x-merge": "lww"}},
    },
}
STALE_SHAPES = ("one counter from base 0", "one lww map")
"""Shapes where every submit is merged: a counter whose base is always 0, and one map written at once."""
HISTORY = 2_000
"""Revisions an execution of a stale shape holds before its rounds, so that base 0 lies far behind."""


async def bench_sessions(address: str, echo: Echo, total: int, rounds: int) -> list[Row]:
    rows: list[Row] = []
    async with (
        StateClient(address, retry=RetryPolicy(attempts=1)) as client,
        grpc.aio.insecure_channel(address) as channel,
    ):
        agents, sessions = (
            Agents(pb_grpc.StateServiceStub(channel), client),
            Sessions(pb_grpc.StateServiceStub(channel)),
        )
        await sessions.rate(await agents.create(COUNTER_SCHEMA, {"hits": 0}), 64, 1, total)  # warm up, as the echo is
        for streams, in_flight in SESSION_SHAPES:
            row = Row(f"Session submits, {streams} streams x {in_flight} in flight, disjoint keys", "commits/s")
            for _ in range(rounds):
                execution = await agents.create(COUNTER_SCHEMA, {"hits": 0})
                rate = functools.partial(sessions.rate, execution, streams, in_flight, total)
                await bracketed_session(row, echo, streams, in_flight, rate)
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
        for shape in STALE_SHAPES:
            row = Row(f"Session submits, 64 streams x 1 in flight, {shape}", "commits/s")
            for _ in range(rounds):
                execution = await agents.create(COUNTER_SCHEMA, {"hits": 0, "m": {}})
                await sessions.rate(execution, 64, 1, HISTORY, shape)  # history first: base 0 is far behind
                rate = functools.partial(sessions.rate, execution, 64, 1, total, shape)
                await bracketed_session(row, echo, 64, 1, rate)
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
        sdk = Row("Session submits, 64 streams x 1 in flight, disjoint keys, through the Python SDK", "commits/s")
        for _ in range(rounds):
            execution = await agents.create(COUNTER_SCHEMA, {"hits": 0})
            await bracketed_session(sdk, echo, 64, 1, functools.partial(sdk_sessions, client, execution, 64, total))
        rows.append(sdk)
        print(f"  {sdk.case}: {statistics.median(sdk.rates):,.0f} {sdk.unit}", file=sys.stderr)
    return rows


async def sdk_sessions(client: StateClient, execution: str, streams: int, total: int) -> tuple[float, list[float]]:
    """`streams` agents, each submitting one patch at a time through `StateClient.session`."""
    latest, latencies = [0], []
    async with contextlib.AsyncExitStack() as stack:
        opened = [
            await stack.enter_async_context(client.session(execution, agent_id=f"agent-{i}")) for i in range(streams)
        ]

        async def agent(index: int) -> None:
            for n in range(total // streams):
                begun = time.perf_counter()
                result = await opened[index].submit({f"agent-{index}": n}, base_revision=latest[0])
                latencies.append(time.perf_counter() - begun)
                latest[0] = max(latest[0], result.revision)

        started = time.perf_counter()
        await asyncio.gather(*(agent(i) for i in range(streams)))
        rate = total // streams * streams / (time.perf_counter() - started)
    return rate, latencies


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
        for shape, patch_of in zip(STALE_SHAPES, (counter_from_zero, lww_map), strict=True):
            row = Row(f"SubmitPatch, 64 in flight, {shape}", "commits/s")
            for _ in range(rounds):
                execution = await agents.create(COUNTER_SCHEMA, {"hits": 0, "m": {}})
                await closed_loop(agents.through_stub(execution, patch_of), 64, HISTORY)  # base 0 far behind
                await bracketed(row, echo.unary_rate, closed_loop(agents.through_stub(execution, patch_of), 64, total))
            rows.append(row)
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
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


def table(rows: list[Row], echo: float, fanout: float | None, sqlite_rate: float) -> str:
    lines = [
        "| case | rate | p50 ms | p99 ms | baseline (bracketing rounds) | ratio |",
        "|---|---|---|---|---|---|",
        f"| raw grpc.aio echo, {ECHO_IN_FLIGHT} in flight | {echo:,.0f} RPC/s | | | ceiling | 1.00 |",
    ]
    if fanout is not None:
        lines.append(
            f"| raw grpc.aio fan-out to {WATCHERS} streams | {fanout:,.0f} broadcasts/s | | | ceiling | 1.00 |"
        )
    lines.append(f"| raw aiosqlite, 1 row per commit | {sqlite_rate:,.0f} commits/s | | | durability reference | |")
    for row in rows:
        latency = " | "
        if row.latencies:
            ordered = sorted(row.latencies)
            latency = f"{ordered[len(ordered) // 2] * 1e3:.2f} | {ordered[int(len(ordered) * 0.99)] * 1e3:.2f}"
        kind = "raw fan-out" if row.case.startswith("Watch") else "raw echo"
        baseline = f"{kind} {statistics.median(row.baselines):,.0f}/s"
        ratio = f"{statistics.median(row.ratios):.2f}"
        if row.stream_baselines:
            baseline += f"; raw bidi echo of the same shape {statistics.median(row.stream_baselines):,.0f} msg/s"
            ratio += f" ({statistics.median(row.stream_ratios):.2f} of bidi)"
        lines.append(
            f"| {row.case} | {statistics.median(row.rates):,.0f} {row.unit} | {latency} | {baseline} | {ratio} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions-only", action="store_true", help="only the Session rows and their baselines")
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
                rows = await bench_sessions(address, echo, total, rounds if args.quick else SESSION_ROUNDS)
                size_ratio = None
                if not args.sessions_only:
                    unary_rows, size_ratio = await bench_state_server(address, echo, total, rounds)
                    rows = unary_rows + rows
            finally:
                server.kill()
                await server.wait()

    echo_rate = statistics.median(b for row in rows if not row.case.startswith("Watch") for b in row.baselines)
    fanouts = [b for row in rows if row.case.startswith("Watch") for b in row.baselines]
    print()
    print(table(rows, echo_rate, statistics.median(fanouts) if fanouts else None, sqlite_rate))
    if size_ratio is not None:
        print(f"\n1 MB state / 1 KB state commit rate (their ratios to echo): {size_ratio:.2f}")
    print(f"server ready to serve in {startup * 1e3:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
