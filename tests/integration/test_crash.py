"""SIGKILL the server during load: every acknowledged revision survives, with its hash; no patch is half-applied."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

from skillstate.clients import RetryPolicy, StateClient, UnavailableError

from ..waiting import eventually

WRITERS = 16


async def start_server_process(db: Path | str, *flags: str) -> tuple[asyncio.subprocess.Process, int]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillstate.cli", "serve", "--db", str(db), "--listen", "127.0.0.1:0", *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    match = re.search(rb"serving on [\d.]+:(\d+)", line)
    assert match, line
    return process, int(match.group(1))


async def test_sigkill_loses_no_acknowledged_revision(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    process, port = await start_server_process(db)
    acknowledged: dict[int, tuple[str, str]] = {}  # revision -> (state_hash, writer key)
    async with StateClient(f"127.0.0.1:{port}", retry=RetryPolicy(attempts=1)) as client:
        schema = {"type": "object", "properties": {"count": {"type": "integer", "x-merge": "counter"}}}
        execution_id = (await client.create_execution(schema=schema, initial_state={"count": 0})).execution_id

        async def writer(w: int) -> None:
            for i in range(10_000):
                key = f"w{w}-{i}"
                try:  # a pair of keys and an increment, all in one patch: visible together or not at all
                    result = await client.submit_patch(
                        execution_id, {f"{key}-a": i, f"{key}-b": i, "count": 1}, agent_id=f"w{w}", base_revision=0
                    )
                except UnavailableError:
                    return
                acknowledged[result.revision] = (result.state_hash, key)

        writers = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
        try:
            await eventually(lambda: len(acknowledged) >= 300, timeout=60)
        finally:
            os.kill(process.pid, signal.SIGKILL)  # the crash under test (or the end of a run that failed first)
            await process.wait()
            await asyncio.gather(*writers)

    process, port = await start_server_process(db)
    try:
        async with StateClient(f"127.0.0.1:{port}") as client:
            head = await client.get_state(execution_id)
            assert head.revision >= max(acknowledged)
            for revision, (state_hash, _) in acknowledged.items():
                assert (await client.get_state(execution_id, revision)).state_hash == state_hash
            state = head.state
            pairs = {k.rsplit("-", 1)[0] for k in state if k != "count"}
            for key in pairs:
                assert f"{key}-a" in state and f"{key}-b" in state, f"half of patch {key} is visible"
            assert {key for _, key in acknowledged.values()} <= pairs
            assert state["count"] == head.revision == len(pairs)
    finally:
        process.kill()
        await process.wait()
