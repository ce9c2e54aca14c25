"""Agents feed ReZip (`--rezip`): over a synthetic library with macros, the scripted test policy expands a macro
its step needs and each episode's outcome is reported, so that ReZip raises the macro's level as docs/skills.md
says ("expanded in half of at least three uses"; a verifier failure; at full, two more split it), through a
restart of the server."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

os.environ["SKILLSTATE_OFFLINE"] = "1"

import pytest

from bench.synthetic import generate_library
from skillstate.agents import SCRIPTED, Agent, MacroFeedback, Recorder, SimConfig, SkillState, run_simulation
from skillstate.agents.protocol.prompts import EXPAND_HINT, render_observation
from skillstate.agents.scripted.policy import needed_macro
from skillstate.clients import Hydrated, HydratedMacro, NotFoundError, SkillRegistryClient, StateClient

from ..conftest import RestartableServer
from ..integration.test_skill_registry import shown_in_summary

LIBRARY = generate_library(40, seed=5)
Where = tuple[str, int, int]


def where(macro: HydratedMacro) -> Where:
    """Where a macro occurrence sits: its id may change when a restart recompresses the library."""
    return macro.skill, macro.first_index, macro.section_count


STEP = re.compile(r",? step \d+$")


def naming(macro: HydratedMacro) -> dict[str, Any]:
    """An event that asks for the routine a macro holds (its name, but the `step N` of a numbered step)."""
    return {"event": f"follow the {STEP.sub('', macro.name).lower()} routine now"}


async def registered(address: str) -> None:
    async with SkillRegistryClient(address) as skills:
        for skill in LIBRARY:
            await skills.register_skill(skill.files, folder=skill.folder)


async def episode(
    address: str, query: str, observations: list[Mapping[str, Any]]
) -> tuple[MacroFeedback, Recorder, Hydrated]:
    """One agent with `--rezip` over P hydrated for `query`: it handles the observations, then the end, and
    reports the episode's outcome."""
    async with StateClient(address) as client, SkillRegistryClient(address) as registry:
        hydrated = await registry.hydrate(query)
        feedback = MacroFeedback(registry, [hydrated])
        execution = await client.create_execution(schema={"type": "object"}, initial_state={})
        recorder = Recorder()
        agent = Agent(
            client, execution.execution_id, "worker", skills=["synthetic"], instructions=hydrated.context,
            model=SCRIPTED, context=SkillState(), recorder=recorder, feedback=feedback,
        )  # fmt: skip
        for payload in [*observations, {"done": True}]:
            await agent.step(render_observation(payload), final=bool(payload.get("done")))
        await agent.report_outcome()
    return feedback, recorder, hydrated


def at(hydrated: Hydrated, place: Where) -> HydratedMacro:
    (macro,) = [m for m in hydrated.macros if where(m) == place]
    return macro


async def test_agents_that_expand_a_macro_raise_its_level_and_a_restart_goes_on_counting(
    restartable: RestartableServer,
) -> None:
    """Every episode's step needs the macro, shown at its contract: the agent asks for it, the runtime expands
    it and reports the episode. At the third use (all expanded) it rises to its outline, at the sixth to full,
    where the agent no longer asks. The server restarts after two episodes: had it forgotten their evidence,
    the third would not raise the level."""
    await registered(restartable.address)
    async with SkillRegistryClient(restartable.address) as skills:
        query, macro = await shown_in_summary(skills, LIBRARY)
    levels, asked, revised = [], [], []
    for run in range(7):
        if run == 2:
            await restartable.stop()
            await restartable.start()
        feedback, recorder, hydrated = await episode(restartable.address, query, [naming(macro)])
        shown = at(hydrated, where(macro))
        levels.append(shown.level)
        asked.append([r.action for r in recorder.records if r.outcome == "expand"] == [f"expand {shown.macro_id}"])
        revised.append([r.level for r in feedback.revisions if r.macro_id == shown.macro_id])
        assert feedback.errors == [] and feedback.reported == [hydrated.hydration_id]
        assert feedback.failures == 0 and not any(feedback.failed.values())
    assert levels == ["contract"] * 3 + ["outline"] * 3 + ["full"]
    assert revised == [[], [], ["outline"], [], [], ["full"], []]
    assert asked == [True] * 6 + [False]  # shown in full: nothing to ask for


async def test_an_action_that_fails_after_an_expansion_reports_the_macros_verifier_failed(
    server_address: str,
) -> None:
    """docs/skills.md: a macro whose verifier failed gets a higher level at once. The step expanded the macro
    and the next observation says its action failed: the episode is reported failed, and the macro with it."""
    await registered(server_address)
    async with SkillRegistryClient(server_address) as skills:
        query, macro = await shown_in_summary(skills, LIBRARY)
    failed = {"last_action": {"action": "Wait", "status": "error", "result": "the routine's check failed"}}
    feedback, _, hydrated = await episode(server_address, query, [naming(macro), failed])
    shown = at(hydrated, where(macro))
    assert feedback.failures == 1 and feedback.failed == {hydrated.hydration_id: {shown.macro_id}}
    assert [(r.macro_id, r.level) for r in feedback.revisions] == [(shown.macro_id, "outline")]
    passed = {"last_action": {"action": "Wait", "status": "ok", "result": "done"}}
    feedback, _, _ = await episode(server_address, query, [naming(macro), passed])  # 1 use (expanded) of 3
    assert feedback.failures == 0 and feedback.revisions == []


async def test_verifier_failures_reported_through_the_sdk_split_a_macro_for_good(
    restartable: RestartableServer,
) -> None:
    """A routine of several sections: each reported verifier failure raises it (outline, full); at full, the
    second one splits it (`level` None), and neither new reports nor a restart bring it back."""
    await registered(restartable.address)

    def long(macro: HydratedMacro) -> bool:
        return macro.level == "contract" and macro.section_count > 1

    async with SkillRegistryClient(restartable.address) as skills:
        query, macro = await shown_in_summary(skills, LIBRARY, long)
        levels = []
        for _ in range(4):
            hydrated = await skills.hydrate(query)
            shown = at(hydrated, where(macro))
            revisions = await skills.report_outcome(
                hydrated.hydration_id, success=False, failed_macro_ids=[shown.macro_id]
            )
            levels.append([r.level for r in revisions if r.macro_id == shown.macro_id])
        assert levels == [["outline"], ["full"], [], [None]]
        after = await skills.hydrate(query)
    await restartable.stop()
    await restartable.start()
    async with SkillRegistryClient(restartable.address) as skills:
        restarted = await skills.hydrate(query)
        steps = (await skills.get_skill(macro.skill)).sections[
            macro.first_index : macro.first_index + macro.section_count
        ]
    skill, first, count = where(macro)
    for hydrated in (after, restarted):  # its sections show on their own (a single one may be a macro of its own)
        assert [m for m in hydrated.macros if m.skill == skill and first <= m.first_index < first + count] == [
            m for m in hydrated.macros if m.skill == skill and m.first_index in range(first, first + count)
            and m.section_count == 1
        ]  # fmt: skip
        assert f"[macro {macro.macro_id}" not in hydrated.context
        assert all(section.text.strip() in hydrated.context for section in steps)  # its text, in full


def test_the_test_policy_asks_for_a_macro_only_when_its_step_names_one_shown_in_summary() -> None:
    p = (
        'Instructions:\n[macro m-0123abcd "Load the input table, step 1", 3 sections, contract; expand it for the '
        'full text]\nreads: table\n[macro m-4567 "Output", 1 section, outline; expand it for the full text]\n'
    )
    ask: Callable[[str, str], str | None] = lambda hint, observation: needed_macro(  # noqa: E731
        f"{p}{hint}\n\nLatest Observation:\n{observation}\n\nProvide your response"
    )
    assert ask(EXPAND_HINT, "Event: load the input table of the ledger") == "m-0123abcd"
    assert ask(EXPAND_HINT, "Event: write the output") == "m-4567"
    assert ask(EXPAND_HINT, "Event: ship the order") is None  # the step needs neither
    assert ask("", "Event: load the input table of the ledger") is None  # no --rezip: never asks
    assert ask(EXPAND_HINT, "Event: load the input table\n\nExpanded macro m-0123abcd:\n# Load") is None  # has it


async def test_a_warehouse_run_reports_each_agents_outcome_and_the_baselines_refuse_rezip(
    server_address: str, tmp_path: Path
) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=9, seed=2, rezip=True))
    assert result.score == 1.0 and result.rezip is not None
    assert (result.rezip["errors"], result.rezip["revisions"], len(result.rezip["reported"])) == ([], [], 3)
    assert result.summary()["rezip"] == result.rezip
    async with SkillRegistryClient(server_address) as skills:
        for hydration_id in result.rezip["reported"]:  # one report per hydration: reported, then forgotten
            with pytest.raises(NotFoundError, match="unknown or expired"):
                await skills.report_outcome(hydration_id, success=True)
    for runtime in ("react", "stateful", "groupchat"):
        with pytest.raises(ValueError, match=f"rezip: the {runtime} runtime is a baseline"):
            SimConfig(runtime=runtime, rezip=True)
    assert SimConfig().rezip is False
