"""How the console runs: beside a server in one event loop (`serve_console`, what `serve --console` runs) and on
its own (`skillstate console`); what it imports; and that its pages load nothing from elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from skillstate.clients import StateClient
from skillstate.console.main import serve_console

from ..test_layout import loaded_modules
from ..waiting import eventually

STATIC = Path(__file__).resolve().parents[2] / "console" / "static"


def test_the_console_loads_neither_the_server_nor_the_agents() -> None:
    ours = {m for m in loaded_modules("import skillstate.console.main") if m.startswith("skillstate.")}
    assert "skillstate.console.app" in ours
    assert not {m for m in ours if m.startswith(("skillstate.server", "skillstate.agents"))}
    assert ours == {m for m in ours if m.startswith(("skillstate.console", "skillstate.clients", "skillstate.state",
                                                      "skillstate.skills"))}  # fmt: skip


def test_the_exported_names() -> None:
    console = importlib.import_module("skillstate.console")
    assert sorted(console.__all__) == [
        "Console", "RunningConsole", "Upstream", "create_app", "run_console", "serve_console", "start_console",
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_serve_console_runs_in_the_callers_loop_until_cancelled(server_address: str, warehouse: str) -> None:
    port = free_port()
    beside = asyncio.create_task(serve_console(server_address, host="127.0.0.1", port=port, token=None, tls=None))
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:

        async def answers() -> bool:
            with contextlib.suppress(httpx.ConnectError):
                return (await http.get("/api/info")).json()["server"] == server_address
            return False

        await eventually(answers)
        async with http.stream("GET", f"/api/executions/{warehouse}/events") as events:
            beside.cancel()
            with pytest.raises(asyncio.CancelledError):
                await beside
            assert [line async for line in events.aiter_lines() if line.startswith("data")] == []
        with pytest.raises(httpx.ConnectError):
            await http.get("/api/info")


async def test_serve_console_fails_on_an_address_it_cannot_listen_on(server_address: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve_console(server_address, host="127.0.0.1", port=port, token=None, tls=None)


async def test_skillstate_console_serves_until_sigterm(server_address: str, warehouse: str) -> None:
    command = [sys.executable, "-m", "skillstate.cli", "console", "--server", server_address, "--listen", "127.0.0.1:0"]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "SKILLSTATE_TOKEN": ""}
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url, line
        async with httpx.AsyncClient(base_url=url.group(0), timeout=10) as http:
            assert (await http.get(f"/api/executions/{warehouse}/state")).json()["revision"] == 2
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_the_pages_load_nothing_from_elsewhere_and_build_no_html_from_text() -> None:
    """Every asset is in the package, and no script parses text as HTML (state values are user data)."""
    files = sorted(STATIC.iterdir())
    assert {f.suffix for f in files} == {".html", ".js", ".css"}
    for path in files:
        text = path.read_text()
        urls = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
        assert urls == set(), path.name
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", text)
        for reference in re.findall(r"(?:src|href)=\"([^\"]+)\"", text):
            assert reference.startswith(("/static/", "data:")), (path.name, reference)
            if reference.startswith("/static/"):
                assert (STATIC / reference.removeprefix("/static/")).is_file()
        for module in re.findall(r"from \"\./([^\"]+)\"", text):
            assert (STATIC / module).is_file(), (path.name, module)


async def test_serve_runs_the_console_beside_the_server(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "skillstate.cli", "serve", "--db", str(tmp_path / "s.db"), "--listen",
               "127.0.0.1:0", "--console", "127.0.0.1:0", "--log-format", "json"]  # fmt: skip
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stderr is not None
        banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        port = re.search(r"serving on 127\.0\.0\.1:(\d+)", banner)
        assert port, banner
        url = None
        while url is None:  # the server's log lines, until the console says where it listens
            record = json.loads(await asyncio.wait_for(process.stderr.readline(), 30))
            url = re.search(r"web console on (http://127\.0\.0\.1:\d+)", record["message"])
        async with StateClient(f"127.0.0.1:{port.group(1)}") as client:
            await client.create_execution("beside", initial_state={"n": 1})
        async with httpx.AsyncClient(base_url=url.group(1), timeout=10) as http:
            assert (await http.get("/api/executions/beside/state")).json()["state"] == {"n": 1}
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_serve_stops_with_exit_1_when_its_console_cannot_listen(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        command = [sys.executable, "-m", "skillstate.cli", "serve", "--db", ":memory:", "--listen", "127.0.0.1:0",
                   "--console", f"127.0.0.1:{busy}"]  # fmt: skip
        process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1 and f"cannot listen on 127.0.0.1:{busy}" in err.decode()
