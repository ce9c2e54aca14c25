"""Screenshots of the web console's pages for docs/console.md: a server with sample data (this repository's
skills, a warehouse execution that three agents write at once, observations), the console on it, and
Debian's chromium driven headless by Playwright (never a browser Playwright downloads).

    .venv/bin/python scripts/console_screenshots.py            # writes docs/console/*.png
    .venv/bin/python scripts/console_screenshots.py --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from playwright.async_api import Page, async_playwright

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.console.main import start_console
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCHEMA = {
    "type": "object",
    "properties": {
        "shipped": {"type": "integer", "x-merge": "counter"},
        "received": {"type": "integer", "x-merge": "counter"},
        "inventory": {"type": "object", "additionalProperties": {"type": "string"}, "x-merge": "lww"},
        "maintenance": {"type": "array", "items": {"type": "string"}, "x-merge": "set"},
        "log": {"type": "array", "x-merge": "append"},
    },
}


async def sample_data(address: str) -> str:
    """Register the project's skills and fill a few executions; returns the one to show."""
    async with SkillRegistryClient(address) as registry:
        for folder in sorted((ROOT / "skills").iterdir()):
            if (folder / "SKILL.md").is_file():
                await registry.register_folder(folder)
    async with StateClient(address) as state:
        shown = "warehouse-7"
        inventory = {f"shelf_{i}": f"item_{i}" for i in (3, 7, 12)}
        initial = {"shipped": 0, "received": 3, "inventory": inventory, "maintenance": [], "log": []}
        await state.create_execution(shown, schema=SCHEMA, initial_state=initial)
        log = ["stored item_21 on shelf_21"]
        steps = [
            ("receiving", {"received": 4, "inventory": {"shelf_21": "item_21"}, "log": log},
             "Store item_21 shelf_21"),
            ("shipping", {"shipped": 1, "inventory": {"shelf_7": None}, "log": [*log, "shipped item_7"]},
             "Ship item_7 shelf_7"),
            ("maintenance", {"maintenance": ["shelf_3"], "log": [*log, "shipped item_7", "shelf_3 closed"]},
             "Clear shelf_3"),
        ]  # fmt: skip
        for base, (agent, patch, action) in enumerate(steps):
            await state.submit_patch(shown, patch, agent_id=agent, base_revision=base, action=action)
        # three agents at once, against one base: the counters and the log add up, the inventory's writes merge
        log = [*log, "shipped item_7", "shelf_3 closed"]
        await asyncio.gather(
            state.submit_patch(shown, {"shipped": 2, "inventory": {"shelf_12": None}, "log": [*log, "shipped item_12"]},
                               agent_id="shipping", base_revision=3, action="Ship item_12 shelf_12"),
            state.submit_patch(shown, {"received": 5, "inventory": {"shelf_12": "item_40"},
                                       "log": [*log, "stored item_40 on shelf_12"]},
                               agent_id="receiving", base_revision=3, action="Store item_40 shelf_12"),
            state.submit_patch(shown, {"maintenance": ["shelf_3", "shelf_9"], "inventory": {"shelf_3": None}},
                               agent_id="maintenance", base_revision=3, action="Clear shelf_9"),
        )  # fmt: skip
        await state.publish_observation(shown, "*", "Customer ordered item_21", source="world", kind="order")
        await state.publish_observation(
            shown, "skill:warehouse-receiving", {"arrived": "item_52", "dock": 2}, source="world", kind="delivery"
        )
        await state.publish_observation(shown, "*", {"status": "ok", "result": "Shipped item_12"}, source="world")
        for name, revisions in (("order-1001", 2), ("order-1002", 5), ("repo-ci-17", 1), ("warehouse-8", 0)):
            await state.create_execution(name, initial_state={"done": []}, schema={
                "properties": {"done": {"type": "array", "x-merge": "set"}}})  # fmt: skip
            for i in range(revisions):
                await state.submit_patch(name, {"done": [f"step-{i}"]}, agent_id=f"agent-{i % 2}", base_revision=i)
    return shown


async def shoot(page: Page, url: str, path: Path, ready: str) -> None:
    await page.goto(url)
    await page.wait_for_selector(ready)
    await page.screenshot(path=str(path), full_page=False)
    print(path)


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "state.db"
        server = await start_server(SqliteRevisionLog(db), "127.0.0.1:0", skills=SqliteSkillStore(db))
        address = f"127.0.0.1:{server.port}"
        try:
            shown = await sample_data(address)
            console = await start_console(address, host="127.0.0.1", port=0, token=None, tls=None)
            try:
                async with async_playwright() as playwright:
                    browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                    page = await browser.new_page(viewport={"width": 1400, "height": 900})
                    url = console.url
                    await shoot(page, f"{url}/", out / "executions.png", "#executions a")
                    await shoot(page, f"{url}/executions/{shown}", out / "execution.png", "#observations li")
                    await page.click("#r2 .rev")  # time travel to revision 2
                    await page.wait_for_selector("#state-title:has-text('time travel')")
                    await page.screenshot(path=str(out / "time-travel.png"))
                    print(out / "time-travel.png")
                    await page.goto(f"{url}/skills")
                    await page.wait_for_selector("#skills a")
                    await page.fill("#query", "ship the customer's order and print the label")
                    await page.click("#hydrate button[type=submit]")
                    await page.wait_for_selector("#hydrate-summary")
                    await page.screenshot(path=str(out / "skills.png"), full_page=True)
                    print(out / "skills.png")
                    await page.goto(f"{url}/skills/warehouse-receiving")
                    await page.wait_for_selector("#graph")
                    await page.click("#graph .node[data-index='8']")
                    await page.screenshot(path=str(out / "skill.png"))
                    print(out / "skill.png")
                    await browser.close()
            finally:
                await console.stop()
        finally:
            await server.stop(grace=0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    asyncio.run(main(parser.parse_args().out))
