"""Fair admission through a real server: one identity's flood does not hold back another's calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skillstate.clients import StateClient
from skillstate.server.auth.credentials import issue
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.credential_store.memory import MemoryCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

COUNTER = {"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}


async def test_a_quiet_identitys_call_is_served_before_a_flooders_queued_calls(tmp_path: Path) -> None:
    """With one seat, the flooder's 40 durable writes queue behind each other; the quiet identity's read,
    sent once they are waiting, takes the next free seat, ahead of them. Each call finishes before the next
    gets the seat, so the order of completions is the order of admission."""
    credentials = MemoryCredentialStore()
    server = await start_server(
        SqliteRevisionLog(tmp_path / "f.db"), "127.0.0.1:0", credentials=credentials, auth=Mode.REQUIRED, seats=1
    )
    address = f"127.0.0.1:{server.port}"
    rights = {Right.READ, Right.WRITE, Right.ADMIN}
    flooder_token = (await issue(credentials, "flooder", ["*"], rights=rights)).token
    quiet_token = (await issue(credentials, "quiet", ["*"], rights=rights)).token
    try:
        async with (
            StateClient(address, token=flooder_token) as flooder,
            StateClient(address, token=quiet_token) as quiet,
        ):
            await flooder.create_execution("x", schema=COUNTER, initial_state={"n": 0})
            await quiet.get_state("x")
            finished: list[str] = []

            async def write(i: int) -> None:
                await flooder.submit_patch("x", {"n": 1}, agent_id="flooder", base_revision=0)
                finished.append(f"f{i}")

            flood = [asyncio.ensure_future(write(i)) for i in range(40)]
            while len(finished) < 2:  # the flood reached the server and is being admitted one call at a time
                await asyncio.sleep(0)
            await quiet.get_state("x")
            finished.append("quiet")
            await asyncio.gather(*flood)
    finally:
        await server.stop(grace=0)
    assert finished.index("quiet") < 6, f"served after {finished.index('quiet')} of the flooder's calls"
