"""Where a SubmitPatch's time goes: the same gRPC stack with less and less of the work behind it.

    python bench/submit_breakdown.py            # about a minute
    python bench/submit_breakdown.py --quick
    python bench/submit_breakdown.py --session  # the same layers under submits over Session streams

Six servers, each in its own process, take the same load (64 agents in flight, each writing its own
member, through the generated stub), each round bracketed by two rounds of the raw grpc.aio echo:
- `no-op`: our servicer whose SubmitPatch returns a fixed reply (gRPC, protobuf and the servicer only);
- `durable floor`: the same, but each reply waits until its request is committed to SQLite in a group
  commit (one multi-row INSERT through aiosqlite's worker thread, synchronous=FULL, as `serve` does), with
  no engine work: the least any durable SubmitPatch can do in this stack;
- `durable floor, on the loop`: the same commit run with the sqlite3 module on the event loop's thread,
  which saves the thread hop but stops the loop for every fsync;
- `engine, memory log`: the whole engine, with an in-memory log (merge, validation, hashing, commit
  bookkeeping; nothing durable);
- `engine, SQLite log, every commit in the writer's thread`: the same with no group commit on the event
  loop (server/storage/sqlite_writer.py says when `serve` commits there);
- `engine, SQLite log`: what `skillstate serve` runs (durable group commits, synchronous=FULL).
The ratios to the echo show what each layer costs; docs/performance.md discusses them. With `--session`
the load is 64 Session streams with one submit in flight each, and each round is bracketed by the raw
unary echo and by the raw bidi echo of the same shape; the no-op and floor variants then replace the
engine's submit (the session's own machinery stays).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

import grpc
from state_server import (
    Agents,
    Echo,
    Row,
    Sessions,
    bracketed,
    bracketed_session,
    closed_loop,
    disjoint_keys,
    running_echo,
    spawn,
)

from skillstate.clients import RetryPolicy, StateClient
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

VARIANT_SERVER = r"""
import asyncio, sqlite3, sys
import aiosqlite
from skillstate.server.engine.results import SubmitResult
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.rpc import state_service as service
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.state.v1 import state_pb2 as pb

variant, db = sys.argv[1], sys.argv[2]

async def no_op_submit(self, request, context):
    return pb.SubmitPatchResponse(revision=1, state_hash="0" * 64, applied_patch_json=request.patch_json)

async def no_op_engine(self, execution_id, agent_id, base_revision, patch_json, *rest):
    return SubmitResult(1, "0" * 64, patch_json, ())

def replace_engine(submit):
    # A session submits through submit_patch_now where it can: None sends it to the replacement.
    StateEngine.submit_patch = submit
    StateEngine.submit_patch_now = lambda self, *args: None

class GroupCommit:
    # Requests waiting for the next commit; one writer task inserts all of them in one statement.

    def __init__(self, insert):
        self.insert, self.waiting, self.wakeup = insert, [], asyncio.Event()
        asyncio.get_running_loop().create_task(self.run())

    async def durable(self, row):
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((row, future))
        self.wakeup.set()
        await future

    async def run(self):
        while True:
            await self.wakeup.wait()
            await asyncio.sleep(0)
            self.wakeup.clear()
            batch, self.waiting = self.waiting, []
            rows = [value for row, _ in batch for value in row]
            await self.insert("INSERT INTO t VALUES " + ",".join(["(?, ?)"] * len(batch)), rows)
            for _, future in batch:
                future.set_result(None)

async def durable_floor(on_loop):
    if on_loop:
        connection = sqlite3.connect(db, isolation_level=None)
        async def insert(sql, rows):
            connection.execute(sql, rows)
    else:
        connection = await aiosqlite.connect(db, isolation_level=None)
        async def insert(sql, rows):
            await connection.execute(sql, rows)
    setup = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL", "CREATE TABLE t (agent TEXT, patch TEXT)")
    for statement in setup:
        await insert(statement, ())
    commits = GroupCommit(insert)

    async def submit(self, request, context):
        await commits.durable((request.agent_id, request.patch_json))
        return pb.SubmitPatchResponse(revision=1, state_hash="0" * 64, applied_patch_json=request.patch_json)

    async def engine_submit(self, execution_id, agent_id, base_revision, patch_json, *rest):
        await commits.durable((agent_id, patch_json))
        return SubmitResult(1, "0" * 64, patch_json, ())

    service.StateServicer.SubmitPatch = submit
    replace_engine(engine_submit)

async def main():
    if variant == "no-op":
        service.StateServicer.SubmitPatch = no_op_submit
        replace_engine(no_op_engine)
    elif variant.startswith("floor"):
        await durable_floor(on_loop=variant == "floor-loop")
    if variant == "sqlite-thread":
        log = SqliteRevisionLog(db, inline_budget=0)
    else:
        log = SqliteRevisionLog(db) if variant == "sqlite" else MemoryRevisionLog()
    running = await start_server(log, "127.0.0.1:0")
    print(f"serving on 127.0.0.1:{running.port}", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

VARIANTS = (
    ("no-op", "SubmitPatch that does nothing (gRPC + protobuf + servicer)"),
    ("floor", "no engine, reply after a group commit to SQLite (aiosqlite worker thread)"),
    ("floor-loop", "no engine, reply after a group commit to SQLite (sqlite3 on the event loop)"),
    ("memory", "engine, in-memory log"),
    ("sqlite-thread", "engine, SQLite log, every commit in the writer's thread (`inline_budget=0`)"),
    ("sqlite", "engine, SQLite log (what `skillstate serve` runs)"),
)


async def measure(variant: str, echo: Echo, total: int, rounds: int, tmp: Path, session: bool) -> Row:
    process, address, _ = await spawn(sys.executable, "-c", VARIANT_SERVER, variant, str(tmp / f"{variant}.db"))
    row = Row(dict(VARIANTS)[variant], "commits/s")
    try:
        async with (
            StateClient(address, retry=RetryPolicy(attempts=1)) as client,
            grpc.aio.insecure_channel(address) as channel,
        ):
            agents = Agents(pb_grpc.StateServiceStub(channel), client)
            sessions = Sessions(pb_grpc.StateServiceStub(channel))
            warm_up = await agents.create({}, {})  # one round unmeasured, as the echo server is warmed up
            if session:
                await sessions.rate(warm_up, 64, 1, total)
            else:
                await closed_loop(agents.through_stub(warm_up, disjoint_keys), 64, total)
            for _ in range(rounds):
                execution = await agents.create({}, {})
                if session:
                    await bracketed_session(row, echo, 64, 1, lambda e=execution: sessions.rate(e, 64, 1, total))  # type: ignore[misc]
                    continue
                load = closed_loop(agents.through_stub(execution, disjoint_keys), 64, total)
                await bracketed(row, echo.unary_rate, load)
    finally:
        process.kill()
        await process.wait()
    print(f"  {row.case}: {statistics.median(row.rates):,.0f}/s", file=sys.stderr)
    return row


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--session", action="store_true", help="submit over 64 Session streams, 1 in flight each")
    args = parser.parse_args()
    total, rounds = (1000, 1) if args.quick else (4000, 3)
    async with running_echo(total) as echo:
        with tempfile.TemporaryDirectory() as tmp:
            rows = [await measure(v, echo, total, rounds, Path(tmp), args.session) for v, _ in VARIANTS]
    load = "64 Session streams x 1 in flight" if args.session else "64 in flight"
    extra = " | raw bidi echo, same shape | ratio to bidi" if args.session else ""
    print(f"\n| server behind the same gRPC stack, {load} | rate | raw echo (bracketing rounds) | ratio{extra} |")
    print("|---|---|---|---|" + ("---|---|" if args.session else ""))
    for row in rows:
        line = (
            f"| {row.case} | {statistics.median(row.rates):,.0f}/s | {statistics.median(row.baselines):,.0f}/s "
            f"| {statistics.median(row.ratios):.2f} |"
        )
        if args.session:
            line += f" {statistics.median(row.stream_baselines):,.0f}/s | {statistics.median(row.stream_ratios):.2f} |"
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
