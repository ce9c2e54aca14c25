"""Agents cooperating over one execution through the real server, with the scripted test policy."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ["SKILLSTATE_OFFLINE"] = "1"

import pytest

from skillstate.agents.envs import repo
from skillstate.agents.protocol.prompts import render_observation
from skillstate.agents.runtime.agent import Agent
from skillstate.agents.runtime.contexts import SkillState
from skillstate.agents.runtime.records import Limits, Recorder
from skillstate.agents.sims.sequential import SimConfig, run_simulation
from skillstate.agents.sims.skills import WAREHOUSE_SCHEMA, WAREHOUSE_SKILLS, ensure_skills, skill_context
from skillstate.clients import PermissionDeniedError, SkillRegistryClient, StateClient

from . import together


async def test_three_agents_share_one_state_that_matches_the_world(server_address: str, tmp_path: Path) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=24, seed=3), jsonl=tmp_path / "steps.jsonl")
    assert (result.score, result.handled) == (1.0, 24)
    async with StateClient(server_address) as client:
        state = await client.get_state(result.execution_id)
        history = [event async for event in client.history(result.execution_id)]
    assert state.state["inventory"] == result.world["inventory"]
    assert {event.agent_id for event in history} == {"receiving", "shipping", "maintenance"}
    assert [event.action for event in history][-3:] == ["Finish"] * 3
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(lines) == len(result.records) == 24 + 3
    assert all(line["outcome"] == "applied" and line["prompt_tokens"] > 0 for line in lines)


async def test_a_seeded_run_repeats_exactly(server_address: str) -> None:
    first = await run_simulation(server_address, SimConfig(horizon=15, seed=9, runtime="memory"))
    second = await run_simulation(server_address, SimConfig(horizon=15, seed=9, runtime="memory"))
    assert first.records == second.records and first.world == second.world and first.score == second.score
    other = await run_simulation(server_address, SimConfig(horizon=15, seed=10, runtime="memory"))
    assert other.records != first.records


@pytest.mark.parametrize("runtime", ["react", "memory", "stateful", "truncated", "summary", "groupchat"])
async def test_every_baseline_runs_to_its_end_through_the_server(server_address: str, runtime: str) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=12, seed=1, runtime=runtime, window_tokens=600))
    assert result.events == 12 and 0 <= result.handled <= 12
    applied = [r for r in result.records if r.outcome == "applied"]
    assert len(applied) == 12 + 3  # one action per event, one Finish per agent
    if runtime in ("react", "stateful", "groupchat"):  # the transcript grows: so does the prompt
        sizes = [r.prompt_tokens for r in applied if r.agent == "receiving"]
        assert sizes == sorted(sizes) and sizes[-1] > sizes[0]


async def test_shared_state_prompts_stay_flat_while_the_group_chat_grows(server_address: str) -> None:
    ours = await run_simulation(server_address, SimConfig(horizon=40, seed=2, recall=1))
    chat = await run_simulation(server_address, SimConfig(horizon=40, seed=2, runtime="groupchat", recall=1))
    assert ours.score == chat.score == 1.0  # with a perfect replay of the chat: only the prompts' sizes differ
    assert max(ours.prompt_sizes) < 2 * min(ours.prompt_sizes)
    assert max(chat.prompt_sizes) > 5 * min(chat.prompt_sizes)
    assert chat.total_tokens > 3 * ours.total_tokens


async def test_faulty_replies_are_retried_and_never_reach_the_state(server_address: str) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=30, seed=4, model="skillstate/faulty-0.4"))
    retries = result.retries()
    assert retries["invalid"] + retries["malformed"] > 0
    async with StateClient(server_address) as client:
        state = await client.get_state(result.execution_id)
    assert state.state["inventory"] == result.world["inventory"]  # every refused patch left the state untouched
    refused = [r for r in result.records if r.outcome in ("invalid", "malformed")]
    assert all(r.error for r in refused)
    assert all(r.revision is None for r in refused)


class ReadsTogether(together.ReadsTogether, Agent):
    def __init__(self, *args: Any, barrier: asyncio.Barrier, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.barrier = barrier


async def two_agents_storing_at_once(server_address: str, schema: dict[str, Any]) -> tuple[dict[str, Any], Recorder]:
    """Two receiving agents read revision 0 together and each store an item: both pick shelf_1, the only free
    shelf."""
    full = {f"shelf_{n}": f"item_{1000 + n}" for n in range(500) if n != 1}
    async with StateClient(server_address) as client:
        created = await client.create_execution(schema=schema, initial_state={"inventory": full})
        recorder = Recorder()
        barrier = asyncio.Barrier(2)
        agents = [
            ReadsTogether(client, created.execution_id, name, skills=["warehouse-receiving"],
                          instructions="Store arrivals.", model="skillstate/scripted", context=SkillState(),
                          recorder=recorder, limits=Limits(), barrier=barrier)
            for name in ("left", "right")
        ]  # fmt: skip
        await asyncio.gather(
            agents[0].step("Event: Shipment arrived containing item_1."),
            agents[1].step("Event: Shipment arrived containing item_501."),
        )
        return (await client.get_state(created.execution_id)).state, recorder


async def test_two_agents_writing_one_shelf_conflict_and_the_loser_rereads(server_address: str) -> None:
    state, recorder = await two_agents_storing_at_once(server_address, WAREHOUSE_SCHEMA)  # `reject` by default
    assert len(state["inventory"]) == 500 and state["inventory"]["shelf_1"] in ("item_1", "item_501")
    outcomes = sorted((r.outcome, r.action) for r in recorder.records)
    assert [o for o, _ in outcomes] == ["applied", "applied", "conflict"], recorder.records
    assert ("applied", "Wait") in outcomes, "the loser read again: no shelf is free now"


async def test_under_lww_the_greater_stamp_keeps_the_shelf_and_nobody_retries(server_address: str) -> None:
    schema = json.loads(json.dumps(WAREHOUSE_SCHEMA))
    schema["properties"]["inventory"]["x-merge"] = "lww"
    state, recorder = await two_agents_storing_at_once(server_address, schema)
    assert state["inventory"]["shelf_1"] == "item_501"  # stamp (0, "right") > (0, "left"): the declared policy
    assert sorted(r.outcome for r in recorder.records) == ["applied", "applied"]


async def test_a_result_cut_to_a_limit_is_said_out_loud(server_address: str) -> None:
    """No silent truncation: an observation whose result was cut says so, and to how many characters."""
    result = await run_simulation(server_address, SimConfig(horizon=6, seed=3, result_limit=10))
    reported = []
    async with StateClient(server_address) as client:
        stream = client.observations(result.execution_id, "receiving", skills=["warehouse-receiving"])
        async for observation in stream:  # the receiving agent's observations, up to its last one
            if "last_action" in observation.payload:
                reported.append(observation.payload)
            if observation.kind == "done":
                break
    assert reported and all(p["last_action"]["truncated"] == 10 for p in reported)
    assert all(len(p["last_action"]["result"]) == 10 for p in reported)
    assert "(The result was cut to 10 characters.)" in render_observation(reported[0])


async def test_a_seeded_group_chat_repeats_exactly_to_its_last_token(server_address: str) -> None:
    """Every step is taken one at a time, the agents' last ones included: the shared transcript is the same."""
    runs = [await run_simulation(server_address, SimConfig(horizon=10, seed=5, runtime="groupchat")) for _ in range(3)]
    assert runs[0].records == runs[1].records == runs[2].records


class Capturing(SkillState):
    """SKILL.state's context, keeping what each prompt was given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def prompt(self, instructions: str, state: Any, observation: str) -> str:
        self.seen.append(dict(state))
        return super().prompt(instructions, state, observation)


async def test_an_agent_sees_only_the_state_its_skill_declares_it_reads(server_address: str) -> None:
    async with StateClient(server_address) as client:
        created = await client.create_execution(initial_state={"inventory": {}, "payroll": {"alice": 100}})
        context = Capturing()
        agent = Agent(client, created.execution_id, "receiving", skills=["warehouse-receiving"],
                      instructions="Store.", model="skillstate/scripted", context=context, recorder=Recorder(),
                      reads=("inventory",))  # fmt: skip
        await agent.step("Event: Shipment arrived containing item_1.")
    assert context.seen == [{"inventory": {}}]


async def test_the_project_skills_declare_what_their_agents_read(server_address: str) -> None:
    from skillstate.clients import SkillRegistryClient

    async with SkillRegistryClient(server_address) as registry:
        await ensure_skills(registry, ("warehouse-shipping", "repo-ci"))
        assert (await skill_context(registry, ("warehouse-shipping",), 3000))[1] == ("inventory",)
        assert (await skill_context(registry, ("warehouse-shipping", "repo-ci"), 3000))[1] == ("inventory", "features")


async def test_agents_on_a_server_that_requires_credentials_each_call_as_themselves(db_path: Path) -> None:
    from skillstate.agents.sims.sequential import ENVIRONMENT
    from skillstate.agents.sims.skills import WAREHOUSE_AGENTS
    from skillstate.server.auth.credentials import issue
    from skillstate.server.auth.guard import Mode
    from skillstate.server.rpc.app import start_server
    from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
    from skillstate.server.storage.records import Right
    from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

    store = SqliteCredentialStore(db_path)
    server = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store, auth=Mode.REQUIRED)
    address = f"127.0.0.1:{server.port}"
    try:
        rights = {Right.ADMIN, Right.PUBLISH, Right.READ, Right.REGISTRY}
        tokens = {ENVIRONMENT: (await issue(store, "warehouse", ["ex-*"], rights=rights)).token}
        for agent, skill in WAREHOUSE_AGENTS.items():
            tokens[agent] = (await issue(store, agent, ["ex-*"], [skill], {Right.READ, Right.WRITE})).token
        result = await run_simulation(address, SimConfig(horizon=12, seed=2), tokens=tokens)
        assert (result.score, result.handled) == (1.0, 12)
        async with StateClient(address, token=tokens[ENVIRONMENT]) as client:
            history = [event async for event in client.history(result.execution_id)]
        assert {event.agent_id for event in history} == set(WAREHOUSE_AGENTS)

        tokens["shipping"] = (await issue(store, "shipping", ["ex-*"], [], {Right.READ, Right.WRITE})).token
        with pytest.raises(PermissionDeniedError, match="skills: shipping does not run warehouse-shipping"):
            await run_simulation(address, SimConfig(horizon=4, seed=2), tokens=tokens)
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize("skill", [*WAREHOUSE_SKILLS, *repo.SKILLS])
async def test_an_agents_p_always_says_what_its_state_holds(server_address: str, skill: str) -> None:
    """Hydration spends the budget on the procedure and left the State section out: P must define the state
    the agent reads and writes, whatever the budget (the skill's State section, or its declared keys)."""
    async with SkillRegistryClient(server_address) as registry:
        await ensure_skills(registry, (skill,))
        package = await registry.get_skill(skill)
        for budget in (300, 3000):
            instructions, reads = await skill_context(registry, (skill,), budget)
            state = [s for s in package.sections if s.title in ("State", "State updates")]
            if state:
                assert all(section.text.strip() in instructions for section in state)
            else:
                assert reads and all(f"`{key}`" in instructions for key in reads)
                assert "of the shared execution state" in instructions


STATE_WORDS = ("state patch", "execution state", "null", "state_patch", "read it fresh", "read them fresh")
"""What only a runtime that keeps a state can act on."""


@pytest.mark.parametrize("env", ["warehouse", "repo"])
async def test_no_runtime_is_told_to_patch_a_state_it_does_not_have(server_address: str, env: str) -> None:
    """Each runtime's first prompt, as the simulation builds it: the skills' state sections reach runtimes that
    keep a state, and runtimes without one get the same skills with those sections about their records."""
    from skillstate.agents.sims.sequential import RUNTIMES, make_context
    from skillstate.agents.sims.skills import RECORDS_TITLE, SETTINGS, hydrated_context

    observation = render_observation({"event": "Shipment arrived containing item_1."})
    async with SkillRegistryClient(server_address) as registry:
        await ensure_skills(registry, SETTINGS[env].skills)
        for runtime in RUNTIMES:
            for agent_id, skill in SETTINGS[env].team.items():
                context = make_context(SimConfig(env=env, runtime=runtime), agent_id, [])
                instructions, reads, _ = await hydrated_context(registry, (skill,), 3000,
                                                                has_state=context.writes_state)  # fmt: skip
                prompt = context.prompt(instructions, {key: {} for key in reads or ()}, observation).lower()
                told = [words for words in STATE_WORDS if words in prompt]
                if context.writes_state:
                    assert "state patch" in prompt and f"## {RECORDS_TITLE}".lower() not in prompt, (runtime, skill)
                else:
                    assert not told and f"## {RECORDS_TITLE}".lower() in prompt, (runtime, skill, told)


async def test_faults_reach_every_runtime_alike_and_only_validation_keeps_them_from_the_world(
    server_address: str,
) -> None:
    """One agent (every runtime sees all it did), the same fault rate for all: each runtime's malformed replies
    are asked again; a state-keeping runtime's wrong values are refused by the server and asked again, while a
    runtime that keeps none sends them to the world, which refuses them only by losing the event."""
    config = SimConfig(agents=1, horizon=60, seed=4, model="skillstate/faulty-0.3")
    runs = {runtime: await run_simulation(server_address, replace(config, runtime=runtime))
            for runtime in ("skillstate", "stateful", "react")}  # fmt: skip
    for runtime, result in runs.items():
        retries = result.retries()
        assert retries["malformed"] > 0 and retries["recovered"] > 0, runtime
        assert retries["recovered"] <= retries["invalid"] + retries["malformed"]
    assert runs["stateful"].retries()["invalid"] > 0, "its update's wrong values are refused"
    assert runs["react"].retries()["invalid"] == 0, "it writes no state: its wrong values go to the world"
    assert runs["react"].score < min(runs["skillstate"].score, runs["stateful"].score)


@pytest.mark.parametrize("agents", [1, 3])
async def test_agents_that_finish_early_end_the_run_instead_of_hanging_it(server_address: str, agents: int) -> None:
    """Found trying a model that says Finish at once: the environment waited forever for an action to the
    next event. An observation no running agent is left to answer counts as not handled."""
    config = SimConfig(agents=agents, horizon=10, seed=1, model="skillstate/finishes-early")
    result = await asyncio.wait_for(run_simulation(server_address, config), 60)
    assert (result.handled, result.events) == (0, 10)
    assert len(result.records) == agents, "one call each, answered Finish"
