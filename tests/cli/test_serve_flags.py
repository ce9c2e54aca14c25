"""`skillstate serve --progress-interval`, `--max-stream-in-flight` and `--inline-commit-budget`: checked, and
passed to the server."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import grpc
import pytest

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from .test_cli import skillstate


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--progress-interval", "0"], "--progress-interval: must be more than 0 and at most 3600 seconds"),
        (["--progress-interval", "3601"], "--progress-interval: must be more than 0 and at most 3600 seconds"),
        (["--progress-interval", "soon"], "--progress-interval: invalid float value"),
        (["--max-stream-in-flight", "0"], "--max-stream-in-flight: must be >= 1"),
        (["--inline-commit-budget", "-0.1"], "--inline-commit-budget: must be at least 0 and at most 1 second"),
        (["--inline-commit-budget", "2"], "--inline-commit-budget: must be at least 0 and at most 1 second"),
    ],
)
async def test_bad_values_are_refused(args: list[str], message: str) -> None:
    code, _, err = await skillstate(None, "serve", "--db", ":memory:", "--listen", "127.0.0.1:0", *args)
    assert code == 2 and message in err


async def test_the_progress_interval_reaches_watch_streams() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillstate.cli", "serve", "--db", ":memory:", "--listen", "127.0.0.1:0",
        "--progress-interval", "0.2", "--max-stream-in-flight", "8",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        match = re.search(rb"serving on [\d.]+:(\d+)", line)
        assert match, line
        async with grpc.aio.insecure_channel(f"127.0.0.1:{int(match.group(1))}") as channel:
            stub = pb_grpc.StateServiceStub(channel)
            await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="x"))
            watch = stub.Watch(pb.WatchRequest(execution_id="x"))
            message = await asyncio.wait_for(watch.read(), 5)  # the default interval (10 s) would not make it
            assert message.WhichOneof("kind") == "progress" and message.progress.head_revision == 0
            watch.cancel()
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
