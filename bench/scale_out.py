"""Scale-out: SubmitPatch on one SQLite server, on one replica over PostgreSQL, and on three replicas over the
same PostgreSQL with leases (the default) and without (`--lease-seconds 0`, every replica racing the others
for revision numbers, as before leases), each with many executions and with one hot execution, in one run;
then failover: the owner of a hot execution killed under a writer (issue 20).

    python bench/scale_out.py --db postgresql://user:pass@127.0.0.1/db      # about four minutes
    python bench/scale_out.py --db "$(scripts/postgres_for_tests.sh)" --quick   # under a minute
    python bench/scale_out.py --db ... --part failover                          # only the failover runs

Every server is `skillstate serve` in its own process; the PostgreSQL configurations get a fresh schema
each (`?search_path=`). The load is 64 calls in flight through the generated stub, spread round-robin over
the replicas: "many executions" gives each of the 64 agents its own execution, "one hot execution" has all
of them write their own member of one execution. With leases, an execution's owner is the replica that
created it: the hot one is created through the first replica, so two calls in three are forwarded to it; the
many are created through the replicas in turn, independently of who writes them (as behind a load balancer
without affinity), so owners are spread evenly and two calls in three are forwarded too. Every round is
bracketed by the raw grpc.aio echo, as in bench/state_server.py. One more configuration has the clients
follow owners (what `StateClient(follow_owners=True)` does, here on the same raw stubs): each agent's first
call is redirected (`NOT_OWNER` naming the owner) and the later ones go to the owner directly. The targets of
issue 20 are checked against the same run's one-replica row: the hot execution on three replicas with
leases at 0.8x its commits/s or more and within 2x its p99; many executions with leases no slower than
without.

Failover: three replicas (leases on, the default 3 s), an execution created through replica A (so A owns
it), four writers submitting patches to it through replica B (which forwards them to A), each patch with its
own client_patch_id; after a second, A gets SIGKILL (one more run: SIGTERM, which hands leases over at once).
The writers use the raw stub, not the SDK: each call has a 10 s deadline, and a failed call is sent again
unchanged (same client_patch_id) after 20 ms, so what is measured is the servers' takeover, not a client's
backoff (B itself keeps a call looking for the owner, up to 15 s). "Takeover" is the time from the signal to
the acknowledgement of the first revision the new owner committed (the first under a later lease epoch, read
from the revisions table); "longest stall" is the longest time any writer waited for an acknowledgement.
Then the history is read through replica C and checked: every acknowledged (revision, state hash,
client_patch_id) is in it, no client_patch_id is in it twice, every revision in it was acknowledged (writers
send each patch until it is), revisions run 1..head without a hole, and the head state holds each writer's
last acknowledged value. The lease table shows the owner before and after. The replicas log at INFO to
temporary files; their warnings and errors are counted (and the first ones printed).

This machine has 2 cores shared by the load, the replicas and PostgreSQL, so the three-replica rows show what
replicas cost here, not what they add on machines of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import re
import signal
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import IO, Any

import asyncpg
import grpc
import orjson
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from postgres_schema import new_schema
from state_server import Echo, Operation, Row, bracketed, closed_loop, running_echo, spawn

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

IN_FLIGHT = 64
CLI = [sys.executable, "-m", "skillstate.cli", "serve", "--listen", "127.0.0.1:0"]
QUIET = ("--log-level", "ERROR")
LEASES_OFF = ("--lease-seconds", "0")
FOLLOWING = "PostgreSQL, three replicas, leases, clients follow owners"

WRITERS = 4
CALL_DEADLINE = 10.0
RETRY_PAUSE = 0.02
BEFORE_SIGNAL = 1.0
"""Seconds the writers run before the owner gets its signal."""
ACKS_AFTER = 40
"""Acknowledgements (after the signal) to see before stopping: more than the writers' calls in flight, so
at least some are commits made after the takeover."""
GIVE_UP = 30.0
TAKEOVER_TARGET = 5.0


class Owners:
    """Where each agent sends its calls: its replica (i % replicas), or, for clients that follow owners (as
    `StateClient(follow_owners=True)` does, here on the raw stub), the owner a redirect named."""

    def __init__(self, stubs: list[pb_grpc.StateServiceStub], follow: bool) -> None:
        self._stubs, self._follow = stubs, follow
        self._owner: dict[str, pb_grpc.StateServiceStub] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.metadata = (("skillstate-route", "redirect"),) if follow else None

    async def call(self, agent: int, execution: str, method: str, request: Any) -> Any:
        while True:
            stub = self._owner.get(execution) or self._stubs[agent % len(self._stubs)]
            try:
                return await getattr(stub, method)(request, metadata=self.metadata)
            except grpc.aio.AioRpcError as e:
                address = owner_address(e) if self._follow else None
                if address is None:
                    raise
                if address not in self._channels:
                    self._channels[address] = grpc.aio.insecure_channel(address)
                self._owner[execution] = pb_grpc.StateServiceStub(self._channels[address])

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


def owner_address(error: grpc.aio.AioRpcError) -> str | None:
    """The owner a NOT_OWNER error names."""
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.reason == "NOT_OWNER":
            return str(info.metadata["owner_address"])
    return None


def submit(owners: Owners, executions: list[str]) -> Operation:
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
        reply = await owners.call(agent, execution, "SubmitPatch", request)
        latest[execution] = max(latest[execution], reply.revision)

    return call


def get_state(owners: Owners, execution: str) -> Operation:
    async def call(agent: int, n: int) -> None:
        await owners.call(agent, execution, "GetState", pb.GetStateRequest(execution_id=execution))

    return call


async def measure(
    label: str,
    db: str,
    replicas: int,
    echo: Echo,
    total: int,
    rounds: int,
    flags: tuple[str, ...] = (),
    follow: bool = False,
) -> list[Row]:
    servers = [await spawn(*CLI, *QUIET, *flags, "--db", db) for _ in range(replicas)]
    channels = [grpc.aio.insecure_channel(address) for _, address, _ in servers]
    stubs = [pb_grpc.StateServiceStub(channel) for channel in channels]
    owners = Owners(stubs, follow)
    rows = [Row(f"{label}, many executions", "commits/s"), Row(f"{label}, one hot execution", "commits/s")]
    reads = Row(f"{label}, GetState at head", "reads/s")
    try:
        for row, spread in zip(rows, (IN_FLIGHT, 1), strict=True):
            for _ in range(rounds):
                executions = [f"x-{uuid.uuid4().hex[:8]}" for _ in range(spread)]
                for i, execution in enumerate(executions):  # the creator owns it: not the writer's replica only
                    creator = stubs[(i // replicas) % replicas]
                    await creator.CreateExecution(pb.CreateExecutionRequest(execution_id=execution))
                await bracketed(row, echo.unary_rate, closed_loop(submit(owners, executions), IN_FLIGHT, total))
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
        for _ in range(rounds):  # a read at head catches up from the database first when replicas share it
            await bracketed(reads, echo.unary_rate, closed_loop(get_state(owners, executions[0]), IN_FLIGHT, total))
        print(f"  {reads.case}: {statistics.median(reads.rates):,.0f} {reads.unit}", file=sys.stderr)
        rows.append(reads)
    finally:
        await owners.close()
        for channel in channels:
            await channel.close()
        for process, _, _ in servers:
            process.kill()
            await process.wait()
    return rows


def percentile(row: Row, share: float) -> float:
    ordered = sorted(row.latencies)
    return ordered[min(int(len(ordered) * share), len(ordered) - 1)]


def compare(rows: dict[str, Row], case: str, reference: str, floor: float | None, p99_within: float | None) -> str:
    """One line: the case's commits/s and p99 against the reference row's, and whether the targets hold."""
    row, ref = rows[case], rows[reference]
    rate = statistics.median(row.rates) / statistics.median(ref.rates)
    normalized = statistics.median(row.ratios) / statistics.median(ref.ratios)
    p99 = percentile(row, 0.99) / percentile(ref, 0.99)
    verdicts = []
    if floor is not None:
        verdicts.append(f"commits/s {'meets' if min(rate, normalized) >= floor else 'MISSES'} >= {floor}x")
    if p99_within is not None:
        verdicts.append(f"p99 {'meets' if p99 <= p99_within else 'MISSES'} <= {p99_within}x")
    return (
        f"- {case} / {reference}: commits/s {rate:.2f}x ({normalized:.2f}x of the echo-normalized ratios), "
        f"p99 {p99:.2f}x{': ' + ', '.join(verdicts) if verdicts else ''}"
    )


# --- failover ------------------------------------------------------------------------------------------


@dataclass
class Ack:
    writer: int
    key: str
    revision: int
    state_hash: str
    duplicate: bool
    sent: float
    """perf_counter when the call that got it was first sent"""
    at: float
    """perf_counter when it came"""


@dataclass
class Failover:
    signal: str
    owners: str = "?"
    takeover: float | None = None
    stall: float = 0.0
    acks: int = 0
    duplicates: int = 0
    lost: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    unacknowledged: list[str] = field(default_factory=list)
    holes: int = 0
    final_state_ok: bool = False
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    log_lines: collections.Counter[str] = field(default_factory=collections.Counter)
    notes: list[str] = field(default_factory=list)


async def spawn_logged(log: IO[bytes], *args: str) -> tuple[asyncio.subprocess.Process, str]:
    """As state_server.spawn, with the server's stderr (its log) going to a file."""
    process = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=log)
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    match = re.search(r"serving on ([\d.]+:\d+)", line)
    if not match:
        raise RuntimeError(f"server did not start: {line!r}")
    return process, match.group(1)


async def lease_of(db: str, schema: str, execution: str) -> tuple[str, int] | None:
    """(the owner's address, the epoch) as the lease table has them; None if it cannot be read."""
    try:
        connection = await asyncpg.connect(db)
    except (OSError, asyncpg.PostgresError):
        return None
    try:
        row = await connection.fetchrow(
            f"SELECT r.address, l.epoch FROM {schema}.leases l JOIN {schema}.replicas r ON r.owner = l.owner "
            "WHERE l.execution_id = $1",
            execution,
        )
    except asyncpg.PostgresError:
        return None
    finally:
        await connection.close()
    return None if row is None else (row[0], row[1])


async def first_revision_after(db: str, schema: str, execution: str, epoch: int | None) -> int | None:
    """The first revision committed under a later lease epoch than `epoch` (by the new owner): after SIGTERM
    the old owner may still commit the calls it had (by the history's commit_time they would count)."""
    if epoch is None:
        return None
    try:
        connection = await asyncpg.connect(db)
    except (OSError, asyncpg.PostgresError):
        return None
    try:
        return await connection.fetchval(  # type: ignore[no-any-return]
            f"SELECT min(revision) FROM {schema}.revisions WHERE execution_id = $1 AND lease_epoch > $2",
            execution,
            epoch,
        )
    except asyncpg.PostgresError:
        return None
    finally:
        await connection.close()


async def write(
    stub: pb_grpc.StateServiceStub, execution: str, writer: int, stop: asyncio.Event, acks: list[Ack], failed: Failover
) -> None:
    """Patch after patch, each sent until it is acknowledged (the same client_patch_id every time)."""
    base, n = 0, 0
    while not stop.is_set():
        request = pb.SubmitPatchRequest(
            execution_id=execution,
            agent_id=f"writer-{writer}",
            base_revision=base,
            patch_json=f'{{"w{writer}":{n}}}',
            client_patch_id=f"w{writer}-{n}",
        )
        sent = time.perf_counter()
        while True:
            try:
                reply = await stub.SubmitPatch(request, timeout=CALL_DEADLINE)
                break
            except grpc.aio.AioRpcError as e:
                failed.errors[f"{e.code().name}: {(e.details() or '')[:80]}"] += 1
                await asyncio.sleep(RETRY_PAUSE)
        at = time.perf_counter()
        acks.append(Ack(writer, request.client_patch_id, reply.revision, reply.state_hash, reply.duplicate, sent, at))
        base, n = max(base, reply.revision), n + 1


async def history(stub: pb_grpc.StateServiceStub, execution: str) -> list[pb.RevisionEvent]:
    events: list[pb.RevisionEvent] = []
    token = ""
    while True:
        page = await stub.GetHistory(
            pb.GetHistoryRequest(execution_id=execution, page_size=1000, page_token=token), timeout=30
        )
        events.extend(page.revisions)
        token = page.next_page_token
        if not token:
            return events


async def failover(db: str, how: signal.Signals, logs: Path) -> Failover:
    """One run: A owns the execution, writers go through B, A gets the signal, history read through C."""
    result = Failover(how.name)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    url = await new_schema(db, schema)
    files = [open(logs / f"{schema}-{name}.log", "wb") for name in "ABC"]  # noqa: SIM115
    servers = []
    try:
        for log in files:
            servers.append(await spawn_logged(log, *CLI, "--log-level", "INFO", "--db", url))
        names = {address: name for (_, address), name in zip(servers, "ABC", strict=True)}
        channels = [grpc.aio.insecure_channel(address) for _, address in servers]
        a, b, c = (pb_grpc.StateServiceStub(channel) for channel in channels)
        execution = f"f-{uuid.uuid4().hex[:8]}"
        await a.CreateExecution(pb.CreateExecutionRequest(execution_id=execution))
        acks: list[Ack] = []
        stop = asyncio.Event()
        writers = [asyncio.create_task(write(b, execution, k, stop, acks, result)) for k in range(WRITERS)]
        await asyncio.sleep(BEFORE_SIGNAL)
        before = await lease_of(db, schema, execution)
        killed_at, killed_wall = time.perf_counter(), time.time()
        servers[0][0].send_signal(how)
        deadline = killed_at + GIVE_UP
        while sum(ack.at > killed_at for ack in acks) < ACKS_AFTER and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        _, pending = await asyncio.wait(writers, timeout=GIVE_UP)
        for task in pending:
            task.cancel()
        if pending:
            result.notes.append(f"{len(pending)} writers still waiting for an acknowledgement after {GIVE_UP:.0f} s")
        after = await lease_of(db, schema, execution)
        result.owners = " → ".join(
            f"{names.get(lease[0], lease[0])} (epoch {lease[1]})" if lease else "?" for lease in (before, after)
        )

        events = await history(c, execution)
        state = await c.GetState(pb.GetStateRequest(execution_id=execution), timeout=30)
        committed = {event.revision: event for event in events}
        result.acks, result.duplicates = len(acks), sum(ack.duplicate for ack in acks)
        for ack in acks:
            event = committed.get(ack.revision)
            if event is None or event.client_patch_id != ack.key or event.state_hash != ack.state_hash:
                result.lost.append(f"{ack.key}@{ack.revision}")
        keys = collections.Counter((event.agent_id, event.client_patch_id) for event in events)
        result.twice = [f"{key[1]}x{count}" for key, count in keys.items() if count > 1]
        acknowledged = {ack.key for ack in acks}
        result.unacknowledged = [event.client_patch_id for event in events if event.client_patch_id not in acknowledged]
        result.holes = len(set(range(1, state.revision + 1)) - set(committed))
        last = {ack.writer: int(ack.key.split("-")[1]) for ack in sorted(acks, key=lambda ack: ack.at)}
        head = orjson.loads(state.state_json)
        result.final_state_ok = all(head.get(f"w{k}") == n for k, n in last.items())

        taken = await first_revision_after(db, schema, execution, before[1] if before else None)
        if taken is None:  # the lease table could not be read: the first revision committed after the signal
            taken = next((e.revision for e in events if e.commit_time.ToNanoseconds() / 1e9 > killed_wall), None)
        if taken is not None:
            result.takeover = min(ack.at for ack in acks if ack.revision == taken) - killed_at
        for k in range(WRITERS):
            mine = sorted((ack for ack in acks if ack.writer == k), key=lambda ack: ack.at)
            result.stall = max([result.stall, *(ack.at - ack.sent for ack in mine)])
    finally:
        for process, _ in servers:
            if process.returncode is None:
                process.kill()
            await process.wait()
        for log in files:
            log.close()
    for name, log in zip("ABC", files, strict=True):
        for line in Path(log.name).read_text(errors="replace").splitlines():
            match = re.match(r"\S+ \S+ (WARNING|ERROR|CRITICAL) (.*)", line)
            if match and "serving without authentication" not in line:
                result.log_lines[f"{name}: {match.group(1)} {match.group(2)[:160]}"] += 1
            elif line.startswith("Traceback") or "INTERNAL" in line:
                result.log_lines[f"{name}: {line[:160]}"] += 1
    return result


def report_failovers(runs: list[Failover]) -> None:
    print("\n| run | signal to A | lease owner (before → after) | takeover s | longest stall s | acks (repeats) "
          "| lost | committed twice | unacknowledged commits | holes | head state | writer retries "
          "| server warnings/errors |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, run in enumerate(runs, 1):
        takeover = "none" if run.takeover is None else f"{run.takeover:.2f}"
        print(f"| {i} | {run.signal} | {run.owners} | {takeover} | {run.stall:.2f} | {run.acks} ({run.duplicates}) "
              f"| {len(run.lost)} | {len(run.twice)} | {len(run.unacknowledged)} | {run.holes} "
              f"| {'ok' if run.final_state_ok else 'WRONG'} | {sum(run.errors.values())} "
              f"| {sum(run.log_lines.values())} |")  # fmt: skip
    killed = [run.takeover for run in runs if run.signal == "SIGKILL"]
    if killed:
        worst = max((t if t is not None else float("inf")) for t in killed)
        print(f"\n- SIGKILL takeover: worst {worst:.2f} s, target under {TAKEOVER_TARGET:.0f} s: "
              f"{'meets' if worst < TAKEOVER_TARGET else 'MISSES'}")  # fmt: skip
    safe = all(not (run.lost or run.twice or run.unacknowledged or run.holes) and run.final_state_ok for run in runs)
    print(f"- no acknowledged write lost, none committed twice: {'holds' if safe else 'BROKEN'}")
    for i, run in enumerate(runs, 1):
        for what, items in (("lost", run.lost), ("twice", run.twice), ("unacknowledged", run.unacknowledged)):
            if items:
                print(f"- run {i} {what}: {', '.join(items[:10])}")
        for error, count in run.errors.most_common(5):
            print(f"- run {i} writer saw {count}x {error}")
        for line, count in run.log_lines.most_common(5):
            print(f"- run {i} log {count}x: {line}")
        for note in run.notes:
            print(f"- run {i}: {note}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a PostgreSQL URL (each configuration gets its own schema)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("all", "load", "failover"), default="all")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)
    signals = [signal.SIGKILL] * (1 if args.quick else 3) + [signal.SIGTERM]
    rows: list[Row] = []
    runs: list[Failover] = []
    started = time.perf_counter()
    if args.part in ("all", "load"):
        async with running_echo(total) as echo:
            with TemporaryDirectory() as tmp:
                rows += await measure("SQLite, one server", str(Path(tmp) / "bench.db"), 1, echo, total, rounds)
            for label, replicas, flags, follow in (
                ("PostgreSQL, one replica", 1, (), False),
                ("PostgreSQL, three replicas, leases", 3, (), False),
                (FOLLOWING, 3, (), True),
                ("PostgreSQL, three replicas, no leases (today)", 3, LEASES_OFF, False),
            ):
                url = await new_schema(args.db, f"bench_{uuid.uuid4().hex[:10]}")
                rows += await measure(label, url, replicas, echo, total, rounds, flags, follow)
    if args.part in ("all", "failover"):
        with TemporaryDirectory() as logs:
            for how in signals:
                runs.append(await failover(args.db, how, Path(logs)))
                run = runs[-1]
                print(f"  failover ({run.signal}): takeover {run.takeover} s, owners {run.owners}", file=sys.stderr)
    print(f"\n({time.perf_counter() - started:.0f} s)\n")
    if rows:
        print("| configuration | rate | p50 ms | p99 ms | raw echo (bracketing rounds) | ratio to echo |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print(f"| {row.case} | {statistics.median(row.rates):,.0f} {row.unit} | {percentile(row, 0.5) * 1e3:.2f} "
                  f"| {percentile(row, 0.99) * 1e3:.2f} | {statistics.median(row.baselines):,.0f}/s "
                  f"| {statistics.median(row.ratios):.2f} |")  # fmt: skip
        by_case = {row.case: row for row in rows}
        one, on, off = (
            "PostgreSQL, one replica",
            "PostgreSQL, three replicas, leases",
            "PostgreSQL, three replicas, no leases (today)",
        )
        print()
        print(compare(by_case, f"{on}, one hot execution", f"{one}, one hot execution", 0.8, 2.0))
        print(compare(by_case, f"{on}, one hot execution", f"{off}, one hot execution", None, None))
        print(compare(by_case, f"{on}, many executions", f"{off}, many executions", 1.0, None))
        print(compare(by_case, f"{on}, many executions", f"{one}, many executions", None, None))
        print(compare(by_case, f"{FOLLOWING}, one hot execution", f"{one}, one hot execution", 0.8, 2.0))
        print(compare(by_case, f"{FOLLOWING}, many executions", f"{off}, many executions", 1.0, None))
    if runs:
        report_failovers(runs)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
