"""The console under test: the real server (tests/conftest.py), the real console on a loopback port in the
same event loop, an HTTP client for its API, and Debian's chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.console.main import RunningConsole, start_console
from skillstate.server.engine.hub import Hub
from skillstate.server.rpc.app import RunningServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCHEMA = {
    "type": "object",
    "properties": {
        "shipped": {"type": "integer", "x-merge": "counter"},
        "inventory": {"type": "object", "additionalProperties": {"type": "string"}, "x-merge": "lww"},
    },
}


@pytest.fixture
async def console(server_address: str) -> AsyncIterator[RunningConsole]:
    running = await start_console(server_address, host="127.0.0.1", port=0, token=None, tls=None)
    yield running
    await running.stop()


@pytest.fixture
async def http(console: RunningConsole) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=console.url, timeout=10) as client:
        yield client


@pytest.fixture
async def state(server_address: str) -> AsyncIterator[StateClient]:
    async with StateClient(server_address) as client:
        yield client


@pytest.fixture
async def registry(server_address: str) -> AsyncIterator[SkillRegistryClient]:
    """The registry, holding the warehouse skills (two of them share a macro) and ship-order."""
    async with SkillRegistryClient(server_address) as client:
        for name in ("ship-order", "warehouse-maintenance", "warehouse-receiving", "warehouse-shipping"):
            await client.register_folder(ROOT / "skills" / name)
        yield client


@pytest.fixture
async def warehouse(state: StateClient) -> str:
    """An execution with two revisions: picker's, then stocker's against the same base (merged)."""
    await state.create_execution(
        "warehouse", schema=SCHEMA, initial_state={"shipped": 0, "inventory": {"shelf_1": "item_7"}}
    )
    await state.submit_patch("warehouse", {"shipped": 1, "inventory": {"shelf_1": None}}, agent_id="picker",
                             base_revision=0, action="Ship item_7 shelf_1")  # fmt: skip
    await state.submit_patch("warehouse", {"shipped": 1, "inventory": {"shelf_2": "item_9"}}, agent_id="stocker",
                             base_revision=0, action="Store item_9 shelf_2")  # fmt: skip
    return "warehouse"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("SKILLSTATE_REQUIRE_BROWSER"):
            pytest.fail(f"no chromium at {CHROMIUM}: apt-get install chromium")
        pytest.skip("browser tests SKIPPED: no chromium (apt-get install chromium)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture
def page_errors() -> list[str]:
    """What the page reported as errors (uncaught exceptions, console errors): none, unless a test expects
    some and takes them out."""
    return []


@pytest.fixture
async def page(browser: Browser, page_errors: list[str]) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    opened = await context.new_page()
    opened.on("pageerror", lambda error: page_errors.append(str(error)))
    opened.on("console", lambda message: page_errors.append(message.text) if message.type == "error" else None)
    yield opened
    await context.close()
    assert page_errors == [], "the page reported errors"


def watchers(server: RunningServer) -> int:
    """Watch streams open on the server (the engine keeps no public count; its metrics gauge reads this)."""
    hub: Hub[Any] = server.engine._revisions
    return hub.count()


def observation_streams(server: RunningServer) -> int:
    return server.engine._observations.stream_count()
