"""What identities and TLS cost: the same load on a server that runs open, one that checks a bearer token
on every call, and one that also speaks TLS.

    python bench/access.py            # about a minute
    python bench/access.py --quick

Each server is `skillstate serve` in its own process on a fresh database; the token server's database
holds one credential issued by `skillstate auth issue` before it starts, so every call is authenticated
and authorized (a cached credential lookup, the rights check, the agent binding). The load is 64 calls in
flight through the generated stub: SubmitPatch with each agent writing its own member (durable commits)
and GetState (no storage). Every round is bracketed by two rounds of the raw grpc.aio echo, as in
bench/state_server.py; the certificate is a self-signed one made with openssl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
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


async def measure(label: str, address: str, token: str | None, tls: ClientTLS | None, echo: Echo,
                  total: int, rounds: int) -> list[Row]:  # fmt: skip
    channel = open_channel(address, token=token, tls=tls)
    stub = pb_grpc.StateServiceStub(channel)
    rows = [Row(f"SubmitPatch, {label}", "commits/s"), Row(f"GetState, {label}", "reads/s")]
    makers: list[Callable[[str], Operation]] = [lambda e: submit_patch(stub, e), lambda e: get_state(stub, e)]
    async with channel, StateClient(channel=channel) as client:
        for row, make in zip(rows, makers, strict=True):
            for _ in range(rounds):
                execution = (await client.create_execution(initial_state={"hits": 0})).execution_id
                await bracketed(row, echo.unary_rate, closed_loop(make(execution), IN_FLIGHT, total))
            print(f"  {row.case}: {statistics.median(row.rates):,.0f} {row.unit}", file=sys.stderr)
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total, rounds = (600, 1) if args.quick else (3000, 3)
    rows: list[Row] = []
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
            for label, db, extra, call_token, tls in setups:
                serve = [*CLI, "serve", "--db", str(folder / db), "--listen", "127.0.0.1:0", "--log-level", "ERROR"]
                process, address, _ = await spawn(*serve, *extra)
                try:
                    rows += await measure(label, address, call_token, tls, echo, total, rounds)
                finally:
                    process.kill()
                    await process.wait()
    print("\n| case | rate | p50 ms | p99 ms | raw echo (bracketing rounds) | ratio to echo | vs open |")
    print("|---|---|---|---|---|---|---|")
    open_rates = {row.case.split(",")[0]: statistics.median(row.rates) for row in rows[:2]}
    for row in rows:
        ordered = sorted(row.latencies)
        rate = statistics.median(row.rates)
        print(f"| {row.case} | {rate:,.0f} {row.unit} | {ordered[len(ordered) // 2] * 1e3:.2f} "
              f"| {ordered[int(len(ordered) * 0.99)] * 1e3:.2f} | {statistics.median(row.baselines):,.0f}/s "
              f"| {statistics.median(row.ratios):.2f} | {rate / open_rates[row.case.split(',')[0]]:.2f} |")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
