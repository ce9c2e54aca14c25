"""Agents at once feed ReZip (`sim --agents-per-skill N --rezip`): each agent hydrates its own P, expands the
macro its events name, and reports its own outcome, which the registry counts as one use per agent; a failed
action blames the macros of the step that chose it, however many steps later its outcome comes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

os.environ["SKILLSTATE_OFFLINE"] = "1"

import pytest

from skillstate.agents import SCRIPTED, Coordination, Recorder, SkillState, TeamAgent, TeamConfig, run_team
from skillstate.agents.sims.concurrent import team_initial, team_schema
from skillstate.agents.sims.team_rezip import own_context
from skillstate.clients import NotFoundError, RevisionEvent, SkillRegistryClient, StateClient
from skillstate.project_skills import FOLDER as PROJECT_SKILLS
from skillstate.server.storage.records import Counts
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

from .test_team import quick

MACRO = "Item"
"""The routine receiving shares with `dock-intake`: named by every arrival (`Shipment arrived containing 3 units
of item_3.`) and shown in summary in the receiving P, so the scripted policy asks for it at every arrival it works
on."""
ROUTINE = f"""## {MACRO}

If the action fails because the item is damaged or its label cannot be read, move it to the quarantine
rack and tell the supervisor before you take the next one.

Damage is common after long trips: pallets shift, wrapping tears and labels fade in the rain. The
quarantine rack stands by the north wall, beside the scales, with room for twenty crates, and the night
shift empties it every morning. The paperwork travels with the goods, in the clear sleeve taped to the
side, so that whoever releases them knows where they came from and who brought them.
"""
DOCK_INTAKE = f"""---
name: dock-intake
description: Log crates at the loading dock for the night shift and file the paperwork with the carrier.
---
# Log crates at the dock

Logs each crate the carrier leaves at the loading dock.

## Workflow

1. Count the crates on the pallet and note the carrier's name.
2. Write each crate in the dock book with the time it came.

## Verify

Confirm that the dock book lists every crate.

{ROUTINE}
## Output

A line in the dock book per crate.
"""
RECEIVING = "stockroom-receiving"


async def register_library(address: str, token: str | None = None) -> None:
    """The project's receiving skill with the shared routine before its Output, and `dock-intake`; run_team
    registers the project's shipping and maintenance skills (their P shows no macro)."""
    receiving = (PROJECT_SKILLS / RECEIVING / "SKILL.md").read_text(encoding="utf-8")
    assert "## Output" in receiving
    receiving = receiving.replace("## Output", f"{ROUTINE}\n## Output")
    async with SkillRegistryClient(address, token=token) as skills:
        await skills.register_skill({f"{RECEIVING}/SKILL.md": receiving.encode()}, folder=RECEIVING)
        await skills.register_skill({"dock-intake/SKILL.md": DOCK_INTAKE.encode()}, folder="dock-intake")


async def shown_macro(address: str) -> str:
    """The id of the macro the receiving P shows, in summary."""
    async with SkillRegistryClient(address) as skills:
        description = (await skills.get_skill(RECEIVING)).summary.description
        (macro,) = (await skills.hydrate(description, skill_names=[RECEIVING])).macros
    assert (macro.name, macro.level) == (MACRO, "contract")
    return macro.macro_id


async def evidence(db: Path) -> dict[str, Counts]:
    """The registry's evidence per macro key (uses, expansions, verifier failures), as it stored it."""
    store = SqliteSkillStore(db)
    await store.open()
    try:
        return await store.macro_evidence()
    finally:
        await store.close()


async def test_each_agent_at_once_reports_its_own_use_and_its_own_expansions(
    server_address: str, db_path: Path
) -> None:
    await register_library(server_address)
    macro, before = await shown_macro(server_address), await evidence(db_path)
    config = quick(agents_per_skill=2, rezip=True, contention=0)  # no pair makes an action fail
    result = await run_team(server_address, config)
    told = result.rezip
    assert told is not None and result.summary()["rezip"] == told
    assert (told["errors"], told["revisions"]) == ([], [])
    assert list(told["expanded"]) == config.agent_ids, "every agent reported"
    assert len(told["reported"]) == len(set(told["reported"])) == len(config.agent_ids), "each its own hydration"
    expanding = {r.agent for r in result.records if r.outcome == "expand"}
    assert {r.action for r in result.records if r.outcome == "expand"} == {f"expand {macro}"}
    assert expanding and expanding <= {f"{RECEIVING}-0", f"{RECEIVING}-1"}, "arrivals name the macro, nothing else"
    assert {agent for agent, macros in told["expanded"].items() if macros} == expanding
    assert not any(told["failed"].values())
    # one use per receiving agent (2, fewer than the 3 any revision needs), one expansion per agent that asked
    assert before == {} and list((await evidence(db_path)).values()) == [(2, len(expanding), 0)]
    async with SkillRegistryClient(server_address) as skills:
        for hydration_id in told["reported"]:  # taken, then forgotten: one report per hydration
            with pytest.raises(NotFoundError, match="unknown or expired"):
                await skills.report_outcome(hydration_id, success=True)


async def test_agents_of_a_skill_get_the_same_p_under_hydration_ids_of_their_own(server_address: str) -> None:
    await register_library(server_address)
    async with SkillRegistryClient(server_address) as skills:
        own = [await own_context(skills, f"{RECEIVING}-{i}", 3000) for i in range(3)]
    assert len({instructions for instructions, _, _ in own}) == 1 and {reads for _, reads, _ in own} == {
        ("stock", "locations")
    }
    hydrations = [feedback.hydrations[0] for _, _, feedback in own]
    assert len({h.hydration_id for h in hydrations}) == 3
    assert {(h.sections, h.macros) for h in hydrations} == {(hydrations[0].sections, hydrations[0].macros)}


async def test_a_failed_action_blames_the_macros_of_its_own_step_though_the_agent_moved_on(
    server_address: str,
) -> None:
    """The agent expands the macro for an arrival, then handles a maintenance event (no macro), then hears that
    the arrival's action failed: the arrival's macro failed its check (ReZip raises its level at once), not the
    latest step's macros."""
    await register_library(server_address)
    macro = await shown_macro(server_address)
    agent_id = f"{RECEIVING}-0"
    async with StateClient(server_address) as client, SkillRegistryClient(server_address) as skills:
        execution_id = (await client.create_execution(schema=team_schema(), initial_state=team_initial())).execution_id
        instructions, reads, feedback = await own_context(skills, agent_id, 3000)
        recorder = Recorder()
        agent = TeamAgent(client, execution_id, agent_id, skills=[RECEIVING], instructions=instructions,
                          model=SCRIPTED, context=SkillState(), recorder=recorder, reads=reads,
                          coordination=Coordination(), feedback=feedback)  # fmt: skip
        running = asyncio.ensure_future(agent.run())
        actions = client.watch(execution_id)

        async def acted(event_id: str) -> None:
            async for revision in actions:
                if (
                    isinstance(revision, RevisionEvent)
                    and isinstance(revision.action, dict)
                    and revision.action.get("event") == event_id
                ):
                    return

        arrival = {
            "event": "Shipment arrived containing 3 units of item_3.",
            "event_id": "e0",
            "tick": 0,
            "deadline": 9,
        }
        await client.publish_observation(execution_id, agent_id, arrival, kind="event")
        await acted("e0")
        repair = {"event": "Maintenance due on shelf_3.", "event_id": "e1", "tick": 1, "deadline": 9}
        await client.publish_observation(execution_id, agent_id, repair, kind="event")
        await acted("e1")
        failed = {"action": "Store item_3 3 shelf_3", "status": "error", "result": "item_3 is damaged"}
        outcome = {"event": arrival["event"], "event_id": "e0", "handled": False, "last_action": failed}
        await client.publish_observation(execution_id, agent_id, outcome, kind="outcome")
        await acted("e0")  # it reopened its claim and answered again
        await client.publish_observation(execution_id, agent_id, {"done": True}, kind="done")
        await asyncio.wait_for(running, 10)
    expansions = [(r.step, r.action) for r in recorder.records if r.outcome == "expand"]
    assert expansions == [(1, f"expand {macro}"), (3, f"expand {macro}")], "the arrival's steps, not the repair's"
    (hydration,) = feedback.hydrations
    assert feedback.failures == 1 and feedback.failed == {hydration.hydration_id: {macro}}
    assert feedback.reported == [hydration.hydration_id]
    assert [(r.macro_id, r.level) for r in feedback.revisions] == [(macro, "outline")]


def test_only_our_runtime_feeds_rezip_at_once() -> None:
    with pytest.raises(ValueError, match="rezip: the groupchat runtime is a baseline"):
        TeamConfig(runtime="groupchat", rezip=True)
    assert TeamConfig().rezip is False
