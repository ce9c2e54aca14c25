"""The pages in a real browser (Debian's chromium, headless, driven by Playwright) against the real console and
server: the list, an execution whose new revisions appear without a reload, time travel, observations, the
skill library, a skill's graph and the hydrate box. Each waits for what it expects to see, never a set time."""

from __future__ import annotations

from playwright.async_api import Page, expect

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.console.main import RunningConsole

TIMEOUT = 10_000  # ms, for things the page must show: generous, it costs nothing when they work


async def test_a_new_revision_appears_without_a_reload(
    page: Page, console: RunningConsole, state: StateClient, warehouse: str
) -> None:
    await page.goto(f"{console.url}/")
    await page.click("#executions a:text-is('warehouse')", timeout=TIMEOUT)
    await expect(page).to_have_url(f"{console.url}/executions/warehouse")
    await expect(page.locator("#r2")).to_contain_text("stocker", timeout=TIMEOUT)
    await expect(page.locator("#r2 .diff")).to_contain_text('+ /inventory/shelf_2: "item_9"')
    await expect(page.locator("#r2 .diff")).to_contain_text("- /shipped: 1")
    await expect(page.locator("#r2 .resolutions")).to_contain_text("/shipped counter → combined")
    await expect(page.locator("#state-title")).to_contain_text("at revision 2 (head, live)")
    await page.evaluate("window.notReloaded = true")

    await state.submit_patch("warehouse", {"shipped": 3, "inventory": {"shelf_2": None}}, agent_id="packer",
                             base_revision=2, action={"ship": "item_9"})  # fmt: skip

    revision = page.locator("#r3")
    await expect(revision).to_contain_text("packer", timeout=TIMEOUT)
    await expect(revision.locator(".diff")).to_contain_text('- /inventory/shelf_2: "item_9"')
    await expect(revision.locator(".diff")).to_contain_text("+ /shipped: 3")
    await expect(revision.locator(".action")).to_contain_text('{"ship": "item_9"}')
    await expect(page.locator("#revisions > li").first).to_have_id("r3")
    await expect(page.locator("#state-title")).to_contain_text("at revision 3 (head, live)")
    await expect(page.locator("#state .leaf[data-path='/shipped']")).to_have_text("shipped: 3")
    await expect(page.locator("#state .leaf[data-path='/shipped']")).to_have_class("leaf changed")
    assert await page.locator("#state [data-path='/inventory/shelf_2']").count() == 0
    await expect(page.locator("#agents")).to_contain_text("packer")
    await expect(page.locator("#facts dd").first).to_have_text("3")
    assert await page.evaluate("window.notReloaded") is True


async def test_time_travel_shows_the_state_at_a_revision(page: Page, console: RunningConsole, warehouse: str) -> None:
    await page.goto(f"{console.url}/executions/warehouse")
    await page.click("#r1 .rev", timeout=TIMEOUT)
    await expect(page.locator("#state-title")).to_contain_text("at revision 1 of 2 (time travel)", timeout=TIMEOUT)
    await expect(page.locator("#state .leaf[data-path='/shipped']")).to_have_text("shipped: 1")
    assert await page.locator("#state [data-path='/inventory/shelf_1']").count() == 0
    await expect(page.locator("#r1")).to_have_class("revision selected")

    await page.fill("#travel", "0")
    await page.press("#travel", "Enter")
    await expect(page.locator("#state-title")).to_contain_text("at revision 0 of 2", timeout=TIMEOUT)
    await expect(page.locator("#state .leaf[data-path='/inventory/shelf_1']")).to_have_text('shelf_1: "item_7"')

    await page.click("#live")
    await expect(page.locator("#state-title")).to_contain_text("at revision 2 (head, live)")
    await expect(page.locator("#state .leaf[data-path='/inventory/shelf_2']")).to_have_text('shelf_2: "item_9"')


async def test_observations_stream_into_the_page(
    page: Page, console: RunningConsole, state: StateClient, warehouse: str
) -> None:
    await state.publish_observation("warehouse", "*", {"order": 1}, source="shop", kind="order")
    await page.goto(f"{console.url}/executions/warehouse")
    await expect(page.locator("#observations li")).to_have_count(1, timeout=TIMEOUT)
    await state.publish_observation("warehouse", "*", "Customer ordered item_2", kind="order")
    await expect(page.locator("#observations li")).to_have_count(2, timeout=TIMEOUT)
    await expect(page.locator("#observations li").first).to_contain_text('"Customer ordered item_2"')
    await expect(page.locator("#observations li").nth(1)).to_contain_text('{"order": 1}')
    await expect(page.locator("#reading")).to_contain_text("agent console")

    await page.fill("input[name=agent]", "packer")  # read as another agent: what is sent to it appears too
    await page.click(".observations-panel button[type=submit]")
    await expect(page.locator("#reading")).to_contain_text("agent packer", timeout=TIMEOUT)
    await state.publish_observation("warehouse", "packer", "for the packer")
    await expect(page.locator("#observations li").first).to_contain_text("for the packer", timeout=TIMEOUT)
    await expect(page.locator("#observations li")).to_have_count(3)


async def test_the_list_shows_a_new_execution_without_a_reload(
    page: Page, console: RunningConsole, state: StateClient, warehouse: str
) -> None:
    await page.goto(f"{console.url}/")
    await expect(page.locator("#executions tbody tr")).to_have_count(1, timeout=TIMEOUT)
    await state.create_execution("warehouse-2")
    await expect(page.locator("#executions tbody tr")).to_have_count(2, timeout=TIMEOUT)
    await expect(page.locator("#executions tbody tr").nth(1)).to_contain_text("warehouse-2")
    await page.fill("#prefix", "warehouse-")
    await expect(page.locator("#executions tbody tr")).to_have_count(1, timeout=TIMEOUT)


async def test_untrusted_text_is_shown_as_text(page: Page, console: RunningConsole, state: StateClient) -> None:
    """State values, keys, agent ids and observations are user data: markup in them stays text."""
    attack = '<img src=x onerror="window.pwned=1">'
    await state.create_execution("x", initial_state={attack: attack})
    await state.submit_patch("x", {"note": attack}, agent_id=attack, base_revision=0, action=attack)
    await state.publish_observation("x", "*", attack, kind=attack, source=attack)
    await page.goto(f"{console.url}/executions/x")
    await expect(page.locator("#observations li")).to_have_count(1, timeout=TIMEOUT)
    await expect(page.locator("#r1 .agent")).to_have_text(attack)
    await expect(page.locator("#state")).to_contain_text(attack)
    await page.goto(f"{console.url}/")
    await expect(page.locator("#executions tbody tr")).to_contain_text(attack, timeout=TIMEOUT)
    assert await page.locator("img").count() == 0
    assert await page.evaluate("window.pwned") is None


async def test_the_skill_library_graph_and_hydrate_box(
    page: Page, console: RunningConsole, registry: SkillRegistryClient
) -> None:
    await page.goto(f"{console.url}/skills")
    await expect(page.locator("#skills tbody tr")).to_have_count(4, timeout=TIMEOUT)
    await page.fill("#query", "ship the customer's order")
    await page.fill("#budget", "2000")
    await page.click("#hydrate button[type=submit]")
    expected = await registry.hydrate("ship the customer's order", budget_tokens=2000)
    await expect(page.locator("#tokens")).to_have_text(f"{expected.token_count} tokens", timeout=TIMEOUT)
    await expect(page.locator("#hydrate-summary")).to_contain_text(
        f"covers {len(expected.anchors_covered)} of {len(expected.anchors)} anchors"
    )
    await expect(page.locator("#context")).to_have_text(expected.context)

    await page.click("#skills a:text-is('warehouse-receiving')")
    skill = await registry.get_skill("warehouse-receiving")
    await expect(page.locator("#graph .node")).to_have_count(len(skill.sections), timeout=TIMEOUT)
    await expect(page.locator("#graph .edge")).to_have_count(len(skill.edges))
    await expect(page.locator("#graph .macro")).to_contain_text("macro When to use · 3 sections")
    for kind in {e[2] for e in skill.edges}:
        assert await page.locator(f"#graph .edge.k-{kind}").count() == sum(1 for e in skill.edges if e[2] == kind)
    await page.click("#graph .node[data-index='8']")
    verify = skill.sections[8]
    await expect(page.locator("#section h2")).to_have_text(f"#8 {verify.title}")
    await expect(page.locator("#section .section-text")).to_have_text(verify.text)
    incident = sum(1 for e in skill.edges if 8 in (e[0], e[1]))
    await expect(page.locator("#graph .edge.focus")).to_have_count(incident)
    await page.uncheck(".legend input >> nth=0")  # hide the first kind of edge
    await expect(page.locator("#graph")).to_have_class("graph focusing hide-order")


async def test_a_missing_execution_says_so(page: Page, console: RunningConsole, page_errors: list[str]) -> None:
    await page.goto(f"{console.url}/executions/nowhere")
    await expect(page.locator(".error")).to_contain_text("NOT_FOUND execution 'nowhere' not found", timeout=TIMEOUT)
    assert [e for e in page_errors if "404" in e] == page_errors != []  # the browser logs the failed read
    page_errors.clear()
