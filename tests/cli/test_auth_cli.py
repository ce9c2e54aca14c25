"""`skillstate auth` and the client options that carry its tokens, against a real server."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from .test_cli import skillstate


@pytest.fixture
async def guarded(db_path: Path) -> AsyncIterator[RunningServer]:
    """A loopback server on db_path that reads the credentials the CLI writes there."""
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=SqliteCredentialStore(db_path))
    yield running
    await running.stop(grace=0)


async def test_issue_use_list_and_revoke(guarded: RunningServer, db_path: Path) -> None:
    db = ["--db", str(db_path)]
    code, out, _ = await skillstate(None, "auth", "issue", *db, "--agent", "root", "--executions", "*",
                                    "--rights", "read,write,admin", "--expires-in", "1h")  # fmt: skip
    issued = json.loads(out)
    assert code == 0 and issued["agent"] == "root" and issued["rights"] == ["admin", "read", "write"]
    assert issued["token"].startswith(f"sst_{issued['token_id']}_") and issued["expires_at"] > issued["issued_at"]

    code, _, err = await skillstate(guarded, "state", "create", "x")
    assert code == 11 and "UNAUTHENTICATED: no credential" in err
    code, out, _ = await skillstate(guarded, "state", "create", "x", "--token", issued["token"])
    assert code == 0
    os.environ["SKILLSTATE_TOKEN"] = issued["token"]
    try:
        code, out, _ = await skillstate(guarded, "state", "patch", "x", '{"n": 1}')  # the agent is the token's
    finally:
        del os.environ["SKILLSTATE_TOKEN"]
    assert code == 0 and json.loads(out)["revision"] == 1

    code, out, _ = await skillstate(None, "auth", "list", *db)
    (listed,) = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and listed["token_id"] == issued["token_id"] and "token" not in listed
    assert issued["token"].removeprefix(f"sst_{issued['token_id']}_") not in out  # the secret (it may hold "_")
    code, out, _ = await skillstate(None, "auth", "revoke", *db, issued["token_id"])
    assert code == 0 and json.loads(out)["revoked_at"] is not None
    code, _, err = await skillstate(None, "auth", "revoke", *db, "nope")
    assert code == 3 and err == "skillstate auth: token id 'nope': no such credential\n"
    code, _, err = await skillstate(None, "auth", "issue", *db, "--agent", " ", "--executions", "*")
    assert code == 5 and "agent: required" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["auth", "issue", "--agent", "a", "--executions", "*", "--rights", "read,fly"], "--rights: 'fly'"),
        (["auth", "issue", "--agent", "a", "--executions", "*", "--expires-in", "soon"], "--expires-in"),
        (["serve", "--tls-cert", "cert.pem"], "--tls-cert and --tls-key are both needed"),
        (["state", "get", "x", "--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
    ],
)
async def test_bad_command_lines(tmp_path: Path, args: list[str], message: str) -> None:
    code, _, err = await skillstate(None, *args, *(["--db", str(tmp_path / "s.db")] if args[0] == "auth" else []))
    assert code == 2 and message in err
