"""Simulations where agents really work at once: a timed world (envs/timed.py) emits events on its own clock,
and several agents per skill handle them over one shared execution (teams/agent.py), or, for the baseline, take
turns in a transcript-sharing group chat (teams/floor.py).

`await run_team(address, TeamConfig(agents_per_skill=4, pace=Pace(rate=1.5)))` registers the warehouse
skills if needed, hydrates each skill's P once, creates the execution, starts the agents (each with its own
client and identity, in this process or, with `processes`, each in its own) and the world, and returns a
TeamResult whose `summary()` holds the figures docs/agents.md defines. With `rezip`, each agent hydrates its
own P instead and reports its outcome to ReZip at its end (team_rezip.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillstate.clients import ClientTLS, SkillRegistryClient, StateClient, open_channel

from ..envs.clock import Pace
from ..envs.timed_driver import TimedDriver, TimedRun
from ..runtime.agent import Agent
from ..runtime.contexts import GroupChat, SkillState, Turn
from ..runtime.llm import _litellm, is_test_policy
from ..runtime.records import Recorder, StepRecord
from ..runtime.rezip import summarize
from ..teams import claims
from ..teams.agent import AgentDied, TeamAgent
from ..teams.floor import Floor, Speaker
from ..teams.inbox import START
from .drift import state_drift
from .sequential import ENVIRONMENT
from .skills import ensure_skills, skill_context
from .team_rezip import own_context
from .team_setup import Team, TeamConfig, policy_options
from .team_worlds import TEAM_WORLDS

READY_TIMEOUT = 120.0
"""Seconds agents may take to start (processes import litellm, seconds each on a busy machine)."""


@dataclass
class TeamResult:
    config: TeamConfig
    run: TimedRun
    records: list[StepRecord]
    counts: dict[str, int]
    """What coordination cost, summed over agents (claims, claim_losses, takeovers, ...)."""
    drift: list[str] | None
    """Paths where Σ and the world disagree at the end (None: a runtime that keeps no shared state)."""
    agents: dict[str, str]
    """agent id -> how it ended: finished, died, stalled (cancelled), finished_early."""
    wall_seconds: float
    rezip: dict[str, Any] | None = None
    """With `rezip`: what the agents that reported told ReZip (rezip.summarize), as the sequential results say."""

    def summary(self) -> dict[str, Any]:
        events = list(self.run.events.values())
        handled = [e for e in events if e.handled_tick is not None]
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in self.records)
        latencies = sorted(e.latency_ticks for e in handled if e.latency_ticks is not None)
        conflicts = sum(r.outcome == "conflict" for r in self.records) + self.counts.get("claim_losses", 0)
        data_conflicts = collections.Counter(
            self.config.policy_of(key) for r in self.records if (key := _data_key(r)) is not None
        )
        return {
            "runtime": self.config.runtime,
            "coordination": self.config.coordination if self.config.runtime == "skillstate" else "turns",
            "agents_per_skill": self.config.agents_per_skill,
            "rate": self.config.pace.rate,
            "tick_ms": self.config.pace.tick_ms,
            "deadline_ticks": self.config.pace.deadline,
            "think_ms": self.config.think_ms,
            "seed": self.config.seed,
            "model": self.config.model,
            "recall": self.config.recall if is_test_policy(self.config.model) else None,
            "events": self.run.expected,
            "handled_on_time": sum(e.on_time for e in handled),
            "late": sum(not e.on_time for e in handled),
            "dropped": self.run.expected - len(handled),
            "duplicate_actions": sum(e.actions_after_handled > 0 for e in events),
            "handed_back": sum(e.handed_back for e in events),
            "conflicts": conflicts,
            "claim_losses": self.counts.get("claim_losses", 0),
            "contention": self.config.contention,
            "resolutions": dict(sorted(self.run.resolutions.items())),
            "data_conflicts": dict(sorted(data_conflicts.items())),
            "state_drift": self.drift,
            "tokens": tokens,
            "cached_prompt_tokens": sum(r.cached_prompt_tokens for r in self.records),
            "tokens_per_handled_event": round(tokens / len(handled), 1) if handled else None,
            "model_calls": len(self.records),
            "makespan_ticks": max((e.handled_tick for e in handled if e.handled_tick is not None), default=0),
            "latency_ticks_p50": _percentile(latencies, 50),
            "latency_ticks_p99": _percentile(latencies, 99),
            "latency_ms_p50": _ms(_percentile(latencies, 50), self.config.pace),
            "latency_ms_p99": _ms(_percentile(latencies, 99), self.config.pace),
            "wall_seconds": round(self.wall_seconds, 2),
            "timed_out": self.run.timed_out,
            "faults": self.config.faulty(),
            "agents_ended": dict(sorted(self.agents.items())),
            "coordination_counts": dict(sorted(self.counts.items())),
        } | ({"rezip": self.rezip} if self.rezip is not None else {})

    def on_time_per_tick(self) -> list[int]:
        """Events handled on time at each tick (the throughput curve)."""
        counts = [0] * (self.run.ticks + 1)
        for e in self.run.events.values():
            if e.on_time and e.handled_tick is not None and e.handled_tick <= self.run.ticks:
                counts[e.handled_tick] += 1
        return counts


def _data_key(record: StepRecord) -> str | None:
    """The top-level key of Σ a refused step's patch conflicted at, if it was data (not a claim)."""
    if record.outcome != "conflict":
        return None
    keys = [path.split("/")[1] for path in record.conflict_paths or [] if path.count("/") >= 1]
    if claims.CLAIMS in keys:
        return None  # the claim was taken over: refused for that, whatever the data
    return next((key for key in keys if key not in claims.RUNTIME_KEYS), None)


def _percentile(values: list[int], percent: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[percent - 1])


def _ms(ticks: float | None, pace: Pace) -> float | None:
    return None if ticks is None else round(ticks * pace.tick_ms, 1)


def team_schema(policies: Mapping[str, str] | None = None, env: str = "warehouse") -> dict[str, Any]:
    """A team world's Σ (its keys under their policies, `policies` replacing some) with claims and clock."""
    schema = TEAM_WORLDS[env].schema(dict(policies or {}))
    schema["properties"].update(claims.SCHEMA)
    return schema


def team_initial(env: str = "warehouse") -> dict[str, Any]:
    """A team world's initial Σ, with `claims` there from the start: claims of two events never meet."""
    return {**TEAM_WORLDS[env].initial, "clock": 0, "claims": {}}


async def run_team(
    address: str,
    config: TeamConfig,
    *,
    jsonl: Path | None = None,
    tokens: Mapping[str, str] | None = None,
    tls: ClientTLS | None = None,
    on_tick: Callable[[int, TimedRun], None] | None = None,
) -> TeamResult:
    """Run one concurrent simulation against the server at `address`; `tokens` as run_simulation takes."""
    tokens = tokens or {}
    recorder = Recorder(jsonl)
    loop = asyncio.get_running_loop()
    _litellm()  # here, not at the first model call: the import holds the loop for seconds
    started = loop.time()
    async with contextlib.AsyncExitStack() as stack:
        channel = open_channel(address, token=tokens.get(ENVIRONMENT), tls=tls)
        stack.push_async_callback(channel.close)
        client, registry = StateClient(channel=channel), SkillRegistryClient(channel=channel)
        skills = config.world.skills
        await ensure_skills(registry, skills)
        has_state = config.runtime == "skillstate"
        contexts = {skill: await skill_context(registry, (skill,), config.context_budget, has_state=has_state)
                    for skill in skills}  # fmt: skip
        schema = team_schema(config.policies, config.env)
        execution = await client.create_execution(schema=schema, initial_state=team_initial(config.env))
        execution_id = execution.execution_id
        world = config.world.make(config.horizon, config.seed, config.contention, config.pace)
        driver = TimedDriver(client, execution_id, world, config.pace, config.agent_ids, timeout=config.timeout,
                             on_tick=on_tick, data_keys=frozenset(config.world.policies))  # fmt: skip
        if config.processes:
            from .workers import start_processes

            team = await start_processes(address, execution_id, config, contexts, tokens, tls, recorder)
        else:
            team = await _start_in_process(stack, address, execution_id, config, contexts, tokens, tls, recorder)
        try:
            for agent_id in config.agent_ids:
                await client.publish_observation(execution_id, agent_id, {}, source=ENVIRONMENT, kind=START)
            await _ready(team)
            timed = await driver.run()
            ended = await _until_ended(team.tasks, config.finish_wait)
            await driver.finish()
            counts = team.counts()
            rezip = summarize(team.told()) if config.rezip else None
        finally:
            for task in team.tasks:
                task.cancel()
            recorder.close()
        final = await client.get_state(execution_id)
    drift = state_drift(world.believed(final.state), world.books()) if config.runtime == "skillstate" else None
    return TeamResult(config, timed, recorder.records, counts, drift, ended, loop.time() - started, rezip)


async def _start_in_process(
    stack: contextlib.AsyncExitStack,
    address: str,
    execution_id: str,
    config: TeamConfig,
    contexts: Mapping[str, tuple[str, tuple[str, ...] | None]],
    tokens: Mapping[str, str],
    tls: ClientTLS | None,
    recorder: Recorder,
) -> Team:
    """Every agent as a task of this process, each with its own client (and, with `rezip`, its own P)."""
    agents: list[Agent] = []
    conversation: list[Turn] = []
    for agent_id in config.agent_ids:
        skill = agent_id.rpartition("-")[0]
        channel = open_channel(address, token=tokens.get(agent_id), tls=tls)
        stack.push_async_callback(channel.close)
        client = StateClient(channel=channel)
        instructions, reads = contexts[skill]
        feedback = None
        if config.rezip:
            instructions, reads, feedback = await own_context(
                SkillRegistryClient(channel=channel), agent_id, config.context_budget
            )
        common: dict[str, Any] = {
            "skills": [skill], "instructions": instructions, "model": config.model_of(agent_id), "recorder": recorder,
            "limits": config.limits, "reads": reads, "policy_options": policy_options(config),
            "transport": config.transport, "feedback": feedback,
        }  # fmt: skip
        if config.runtime == "groupchat":
            agents.append(Speaker(client, execution_id, agent_id, context=GroupChat(agent_id, conversation), **common))
        else:
            agents.append(TeamAgent(client, execution_id, agent_id, context=SkillState(),
                                    coordination=config.coordination_of(agent_id), **common))  # fmt: skip
    if config.runtime == "groupchat":
        speakers = [a for a in agents if isinstance(a, Speaker)]
        floor = Floor(agents[0].client, execution_id, speakers, conversation, transport=config.transport)
        return Team({asyncio.ensure_future(floor.run()): "floor"}, lambda: {"turns": floor.turns}, _nothing)

    def counts() -> dict[str, int]:
        summed: collections.Counter[str] = collections.Counter()
        for agent in agents:
            summed.update(getattr(agent, "counts", {}))
        return dict(summed)

    async def ready() -> None:
        await asyncio.gather(*(agent.ready.wait() for agent in agents if isinstance(agent, TeamAgent)))

    async def run(agent: Agent) -> str:
        await agent.run()
        return agent.ended if isinstance(agent, TeamAgent) else "finished"

    def told() -> dict[str, dict[str, Any]]:
        return {a.agent_id: a.feedback.summary() for a in agents if a.feedback is not None and a.feedback.told}

    return Team({asyncio.ensure_future(run(agent)): agent.agent_id for agent in agents}, counts, ready, told)


async def _nothing() -> None:
    return None


async def _ready(team: Team) -> None:
    """Wait for every agent to be ready, failing with the first agent that failed instead."""
    ready = asyncio.ensure_future(team.ready())
    done, _ = await asyncio.wait([ready, *team.tasks], timeout=READY_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
    if ready in done:
        ready.result()  # an agent (a worker process) that ended before the run started: its error
        return
    ready.cancel()
    for task in done:
        task.result()  # an agent that failed before the run: its error
    raise TimeoutError(f"the agents were not ready within {READY_TIMEOUT:.0f} s")


async def _until_ended(tasks: dict[asyncio.Future[Any], str], finish_wait: float) -> dict[str, str]:
    """How each agent ended, once the world is done: finished, finished_early, died (counted, not raised), or
    stalled (still running `finish_wait` seconds later, then cancelled)."""
    done, pending = await asyncio.wait(tasks, timeout=finish_wait)
    ended: dict[str, str] = {}
    for task in done:
        error = task.exception()
        if isinstance(error, AgentDied):
            ended[tasks[task]] = "died"
        elif error is not None:
            raise error
        else:
            ended[tasks[task]] = task.result() or "finished"
    for task in pending:
        task.cancel()
        ended[tasks[task]] = "stalled"
    await asyncio.gather(*pending, return_exceptions=True)
    return ended
