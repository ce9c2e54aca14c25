"""The `skillstate` command against a real server: output, and exit codes scripts can rely on."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from skillstate.server.rpc.app import RunningServer


async def skillstate(server: RunningServer | None, *args: str, stdin: str = "") -> tuple[int, str, str]:
    extra = ["--server", f"127.0.0.1:{server.port}"] if server is not None else []
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillstate.cli", *args, *extra,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_create_patch_get_history(server: RunningServer) -> None:
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}})
    code, out, _ = await skillstate(server, "state", "create", "demo", "--schema", schema, "--state", '{"n": 0}')
    assert code == 0 and json.loads(out)["execution_id"] == "demo"
    code, out, _ = await skillstate(server, "state", "patch", "demo", '{"n": 1}', "--agent", "a", "--base", "0")
    assert code == 0 and json.loads(out)["revision"] == 1
    code, out, _ = await skillstate(
        server,
        "state",
        "patch",
        "demo",
        "-",
        "--agent",
        "b",
        "--base",
        "0",
        "--action",
        '"Ship item_1"',
        stdin='{"n": 1}',
    )
    assert code == 0 and json.loads(out)["resolutions"] == [{"path": "/n", "policy": "counter", "outcome": "combined"}]
    code, out, _ = await skillstate(server, "state", "get", "demo")
    assert json.loads(out)["state"] == {"n": 2}
    code, out, _ = await skillstate(server, "state", "history", "demo")
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["revision"], e["agent_id"], e["action"]) for e in events] == [(1, "a", None), (2, "b", "Ship item_1")]
    code, out, _ = await skillstate(server, "state", "watch", "demo", "--from", "1", "--count", "1")
    assert code == 0 and json.loads(out)["revision"] == 2
    code, out, _ = await skillstate(server, "state", "compact", "demo", "--up-to", "2")
    assert code == 0 and json.loads(out) == {"compact_revision": 0}  # no snapshot after the initial state yet


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["state", "get", "missing"], 3, "NOT_FOUND: execution 'missing' not found"),
        (["state", "patch", "demo", '{"n": "x"}', "--agent", "a"], 5, "/n: 'x' is not of type 'integer'"),
        (["state", "patch", "demo", '{"n": 2}', "--agent", "a", "--base", "0"], 4, "conflict at /n"),
        (["state", "patch", "demo", '{"n": 2}', "--agent", "a", "--base", "9"], 6, "ahead of the head revision"),
        (["state", "create", "demo"], 7, "already exists"),
        (["state", "compact", "demo", "--up-to", "5"], 6, "up_to: 5 is outside 0..1"),
        (["state", "patch", "demo", "{bad", "--agent", "a"], 2, "patch: not valid JSON"),
        (["state", "patch", "demo", "@/no/such/file", "--agent", "a"], 2, "cannot read /no/such/file"),
    ],
)
async def test_errors_map_to_exit_codes(server: RunningServer, args: list[str], code: int, message: str) -> None:
    await skillstate(server, "state", "create", "demo", "--schema", '{"properties": {"n": {"type": "integer"}}}')
    await skillstate(server, "state", "patch", "demo", '{"n": 1}', "--agent", "a", "--base", "0")
    returned, _, err = await skillstate(server, *args)
    assert (returned, message in err) == (code, True), err


async def test_unreachable_server_exits_8() -> None:
    code, _, err = await skillstate(None, "state", "get", "x", "--server", "127.0.0.1:1")
    assert code == 8 and "UNAVAILABLE" in err
