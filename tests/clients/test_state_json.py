"""get_state_json: the state as the server's canonical JSON text, undecoded, equal to what get_state decodes."""

from __future__ import annotations

import asyncio
import json

from skillstate.clients import StateClient, SyncStateClient
from skillstate.server.rpc.app import RunningServer


async def test_the_text_is_the_canonical_form_of_the_decoded_state(client: StateClient) -> None:
    state = {"zeta": [1, {"b": 2, "a": "é"}], "alpha": {"y": None, "x": 1.5}, "big": 2**64 - 1}
    await client.create_execution("text", initial_state=state)
    await client.submit_patch("text", {"alpha": {"y": 2}}, agent_id="a", base_revision=0)
    for at in (0, None):
        decoded, text = await client.get_state("text", at), await client.get_state_json("text", at)
        assert (text.revision, text.state_hash) == (decoded.revision, decoded.state_hash)
        assert json.loads(text.state_json) == decoded.state
        assert text.state_json == json.dumps(decoded.state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert (await client.get_state_json("text", 0)).state_json.startswith(
        '{"alpha":{"x":1.5},"big":18446744073709551615'
    )


async def test_the_sync_client_reads_it_too(server: RunningServer) -> None:
    def read() -> str:  # in a thread: the server runs in this loop
        with SyncStateClient(f"127.0.0.1:{server.port}") as client:
            client.create_execution("sync", initial_state={"n": 1})
            return client.get_state_json("sync").state_json

    assert await asyncio.to_thread(read) == '{"n":1}'
