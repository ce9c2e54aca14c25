"""A log altered behind the server's back is reported as DATA_LOSS, for that execution only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import grpc
import pytest

from skillstate.clients import DataLossError, StateClient

from ..conftest import RestartableServer


async def test_a_broken_hash_chain_is_data_loss(restartable: RestartableServer, db_path: Path) -> None:
    async with StateClient(restartable.address) as client:
        for name in ("a", "b"):
            await client.create_execution(name)
            await client.submit_patch(name, {"n": 1}, agent_id="ada", base_revision=0)
    await restartable.stop()
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE revisions SET action_json = '\"forged\"' WHERE execution_id = 'a'")
    await restartable.start()
    async with StateClient(restartable.address) as client:
        with pytest.raises(DataLossError, match="hash chain broken at revision 1") as caught:
            await client.get_state("a")
        assert caught.value.status == grpc.StatusCode.DATA_LOSS
        assert (await client.get_state("b")).state == {"n": 1}
