"""The whole server on PostgreSQL: state, skills and credentials in one database, through a restart, and
`skillstate serve` and `skillstate auth` given a postgresql:// URL."""

from __future__ import annotations

import json

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.backends import open_credential_store, open_log, open_skill_store

from ..cli.test_cli import skillstate
from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures
from .test_crash import start_server_process
from .test_skill_registry import package


async def start(url: str):  # type: ignore[no-untyped-def]
    return await start_server(
        open_log(url), "127.0.0.1:0", skills=open_skill_store(url), credentials=open_credential_store(url)
    )


async def test_everything_survives_a_restart_on_postgres(postgres_url: str) -> None:  # noqa: F811
    schema = {"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}
    running = await start(postgres_url)
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            await client.create_execution("x", schema=schema, initial_state={"n": 0})
            for base in range(5):
                await client.submit_patch("x", {"n": base + 1}, agent_id="a", base_revision=base)
            stale = await client.submit_patch("x", {"n": 1}, agent_id="b", base_revision=0)  # merged as +1
            before = await client.get_state("x")
            await client.publish_observation("x", "a", {"event": "kept"})
        async with SkillRegistryClient(f"127.0.0.1:{running.port}") as registry:
            await registry.register_skill(package("ship-order"))
    finally:
        await running.stop()
    assert stale.revision == 6 and before.state == {"n": 6}

    running = await start(postgres_url)
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            after = await client.get_state("x")
            history = [event async for event in client.history("x")]
            observation = await anext(client.observations("x", "a"))
        async with SkillRegistryClient(f"127.0.0.1:{running.port}") as registry:
            skill = await registry.get_skill("ship-order")
    finally:
        await running.stop()
    assert (after.revision, after.state, after.state_hash) == (before.revision, before.state, before.state_hash)
    assert [e.revision for e in history] == [1, 2, 3, 4, 5, 6] and observation.payload == {"event": "kept"}
    assert skill.summary.name == "ship-order"


async def test_serve_and_auth_take_a_postgresql_url(postgres_url: str) -> None:  # noqa: F811
    code, out, err = await skillstate(None, "auth", "issue", "--db", postgres_url, "--agent", "root",
                                      "--executions", "*", "--rights", "read,write,admin")  # fmt: skip
    assert code == 0, err
    token = json.loads(out)["token"]
    process, port = await start_server_process(postgres_url)  # type: ignore[arg-type]
    try:
        async with StateClient(f"127.0.0.1:{port}", token=token) as client:
            await client.create_execution("x", initial_state={"a": 1})
            assert (await client.get_state("x")).state == {"a": 1}
    finally:
        process.terminate()
        await process.wait()
    code, out, _ = await skillstate(None, "auth", "list", "--db", postgres_url)
    assert code == 0 and json.loads(out)["agent"] == "root"
