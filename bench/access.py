"""What identities and TLS cost: the same load on a server that runs open, one that checks a bearer token
on every call, and one that also speaks TLS.

    python bench/access.py            # about two minutes
    python bench/access.py --quick

Each server is `skillstate serve` in its own process on a fresh database; the token server's database
holds one credential issued by `skillstate auth issue` before it starts, so every call is authenticated
and authorized (a cached credential lookup, the rights check, the agent binding). The load is 64 calls in
flight through the generated stub: SubmitPatch with each agent writing its own member (durable commits)
and GetState (no storage). Every round is bracketed by two rounds of the raw grpc.aio echo, as in
bench/state_server.py, and every round on a checking server also by two rounds on the open one, which runs
beside it: "vs open" is the median over rounds of the rate to the mean of the open rounds around it. The
certificate is a self-signed one made with openssl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from state_server import Echo, Operation, Row, bracketed, closed_loop, running_echo, spawn

from skillstate.clients import ClientTLS, StateClient, open_channel
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

IN_FLIGHT = 64
CLI = [sys.executable, "-m", "skillstate.cli"]


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def issue_token(db: Path) -> str:
    issued = subprocess.run(
        [*CLI, "auth", "issue", "--db", str(db), "--agent", "bench", "--executions", "*", "--rights",
         "read,write,admin"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return str(json.loads(issued.stdout)["token"])


def submit_patch(stub: pb_grpc.StateServiceStub, execution: str) -> Operation:
    """Each agent writes its own member against the newest revision it knows (the token's agent: `bench`)."""
    latest = [0]

    async def submit(agent: int, n: int) -> None:
        request = pb.SubmitPatchRequest(
            execution_id=execution, agent_id="bench", base_revision=latest[0], patch_json=f'{{"a{agent}":{n}}}'
        )
        latest[0] = max(latest[0], (await stub.SubmitPatch(request)).revision)

    return submit


def get_state(stub: pb_grpc.StateServiceStub, execution: str) -> Operation:
    async def read(agent: int, n: int) -> None:
        await stub.GetState(pb.GetStateRequest(execution_id=execution))

    return read


@dataclass
class Server:
    label: str
    stub: pb_grpc.StateServiceStub
    client: StateClient


@contextlib.asynccontextmanager
async def serving(label: str, serve: list[str], token: str | None, tls: ClientTLS | None) -> AsyncIterator[Server]:
    """`skillstate serve` in its own process, and a channel to it carrying the token."""
    process, address, _ = await spawn(*serve)
    try:
        channel = open_channel(address, token=token, tls=tls)
        async with channel, StateClient(channel=channel) as client:
            yield Server(label, pb_grpc.StateServiceStub(channel), client)
    finally:
        process.kill()
        await process.wait()


Maker = Callable[[pb_grpc.StateServiceStub, str], Operation]
OPERATIONS: list[tuple[str, str, Maker]] = [
    ("SubmitPatch", "commits/s", submit_patch),
    ("GetState", "reads/s", get_state),
]


async def one_round(server: Server, row: Row, make: Maker, echo: Echo, total: int) -> float:
    """One round on a fresh execution, bracketed by the raw echo; returns its rate."""
    execution = (await server.client.create_execution(initial_state={"hits": 0})).execution_id
    await bracketed(row, echo.unary_rate, closed_loop(make(server.stub, execution), IN_FLIGHT, total))
    return row.rates[-1]


async def measure(servers: list[Server], echo: Echo, total: int, rounds: int) -> tuple[list[Row], dict[str, float]]:
    """Every round of every case bracketed by the raw echo; each round on a checking server also between two
    rounds on the open one (open, token, open, TLS, open, token, ...). Returns the rows and, per row, the
    median over its rounds of its rate to the mean of the two open rounds around it."""
    open_server, *checking = servers
    rows = {(server.label, op): Row(f"{op}, {server.label}", unit) for op, unit, _ in OPERATIONS for server in servers}
    vs_open: dict[str, float] = {}
    for operation, _, make in OPERATIONS:
        open_row = rows[open_server.label, operation]
        ratios: dict[str, list[float]] = {server.label: [] for server in checking}
        before = await one_round(open_server, open_row, make, echo, total)
        for _ in range(rounds):
            for server in checking:
                rate = await one_round(server, rows[server.label, operation], make, echo, total)
                after = await one_round(open_server, open_row, make, echo, total)
                ratios[server.label].append(rate / ((before + after) / 2))
                before = after
        vs_open[open_row.case] = 1.0
        for label, measured in ratios.items():
            vs_open[rows[label, operation].case] = statistics.median(measured)
        for server in servers:
            row = rows[server.label, operation]
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
    return [rows[server.label, operation] for server in servers for operation, _, _ in OPERATIONS], vs_open


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)
    async with running_echo(total) as echo:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            cert, key = self_signed(folder)
            token = issue_token(folder / "token.db")
            tls_token = issue_token(folder / "tls.db")
            setups = [
                ("open (loopback, no credential issued)", "open.db", [], None, None),
                ("bearer token", "token.db", [], token, None),
                ("bearer token over TLS", "tls.db", ["--tls-cert", str(cert), "--tls-key", str(key)], tls_token,
                 ClientTLS.from_files(cert)),
            ]  # fmt: skip
            async with contextlib.AsyncExitStack() as stack:
                servers = []
                for label, db, extra, call_token, tls in setups:
                    serve = [*CLI, "serve", "--db", str(folder / db), "--listen", "127.0.0.1:0", "--log-level",
                             "ERROR", *extra]  # fmt: skip
                    servers.append(await stack.enter_async_context(serving(label, serve, call_token, tls)))
                rows, vs_open = await measure(servers, echo, total, rounds)
    print("\n| case | rate | p50 ms | p99 ms | raw echo (bracketing rounds) | ratio to echo "
          "| vs open (bracketing rounds) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        ordered = sorted(row.latencies)
        print(f"| {row.case} | {statistics.median(row.rates):,.0f} {row.unit} | {ordered[len(ordered) // 2] * 1e3:.2f} "
              f"| {ordered[int(len(ordered) * 0.99)] * 1e3:.2f} | {statistics.median(row.baselines):,.0f}/s "
              f"| {statistics.median(row.ratios):.2f} | {vs_open[row.case]:.2f} |")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
