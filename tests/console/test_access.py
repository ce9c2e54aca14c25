"""The console reads with the token it is given, and no more: what the token may not read is 403, a token the
server does not know is 401, and the list shows only what the token may read. The console also answers
only loopback Host names when it listens on loopback, and sends its security headers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from skillstate.clients import StateClient
from skillstate.console.main import start_console
from skillstate.server.auth import credentials
from skillstate.server.auth.guard import Mode
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
from skillstate.server.storage.records import Right
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore


@pytest.fixture
async def secured(db_path: Path) -> AsyncIterator[RunningServer]:
    """A server that requires credentials, with executions "orders" and "elsewhere"."""
    store = SqliteCredentialStore(db_path)
    running = await start_server(
        SqliteRevisionLog(db_path), "127.0.0.1:0", skills=SqliteSkillStore(db_path), credentials=store,
        auth=Mode.REQUIRED,
    )  # fmt: skip
    admin = await credentials.issue(store, "root", ["*"], rights=set(Right))
    async with StateClient(f"127.0.0.1:{running.port}", token=admin.token) as state:
        for name in ("orders", "elsewhere"):
            await state.create_execution(name, initial_state={"n": 0})
    yield running
    await running.stop(grace=0)


@contextlib.asynccontextmanager
async def reader(server: RunningServer, token: str) -> AsyncIterator[httpx.AsyncClient]:
    console = await start_console(f"127.0.0.1:{server.port}", host="127.0.0.1", port=0, token=token, tls=None)
    try:
        async with httpx.AsyncClient(base_url=console.url, timeout=10) as client:
            yield client
    finally:
        await console.stop()


async def test_a_read_token_reads_its_executions_and_nothing_else(secured: RunningServer) -> None:
    token = (await credentials.issue(secured.credentials, "viewer", ["orders"], rights={Right.READ})).token
    async with reader(secured, token) as http:
        assert (await http.get("/api/info")).json()["token"] is True
        listed = (await http.get("/api/executions")).json()["executions"]
        assert [e["execution_id"] for e in listed] == ["orders"]
        assert (await http.get("/api/executions/orders/state")).json()["state"] == {"n": 0}
        for path in ("", "/state", "/history", "/events", "/observations"):
            denied = await http.get(f"/api/executions/elsewhere{path}")
            assert denied.status_code == 403, path
            assert denied.json()["error"]["status"] == "PERMISSION_DENIED"
            assert "viewer" in denied.json()["error"]["message"]


async def test_an_unknown_token_is_401(secured: RunningServer) -> None:
    async with reader(secured, "sst_000000000000_" + "0" * 43) as http:
        for path in ("/api/executions", "/api/executions/orders/state", "/api/skills"):
            answer = await http.get(path)
            assert answer.status_code == 401, path
            assert answer.json()["error"]["status"] == "UNAUTHENTICATED"


async def test_only_loopback_host_names_are_answered(http: httpx.AsyncClient) -> None:
    for host in ("127.0.0.1", "localhost:8080", "[::1]:8080", "127.0.0.1:1", "127.0.0.2:8080", "127.1.2.3"):
        assert (await http.get("/api/info", headers={"host": host})).status_code == 200, host
    for host in ("rebound.example:8080", "rebound.example", "10.0.0.1:8080", ""):
        answer = await http.get("/api/info", headers={"host": host})
        assert answer.status_code == 421, host
        assert answer.json()["error"]["status"] == "PERMISSION_DENIED"


async def test_every_answer_carries_the_security_headers(http: httpx.AsyncClient) -> None:
    for path in ("/", "/static/dom.js", "/api/info", "/api/nothing"):
        headers = (await http.get(path)).headers
        assert "script-src 'self'" in headers["content-security-policy"], path
        assert "default-src 'none'" in headers["content-security-policy"], path
        assert headers["x-content-type-options"] == "nosniff"
        assert "access-control-allow-origin" not in headers
        if not path.startswith("/api/"):  # pages and assets: revalidated, so an upgraded console runs no stale script
            assert headers["cache-control"] == "no-cache", path
