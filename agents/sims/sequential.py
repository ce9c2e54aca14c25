"""SkillExecBench-style simulations through a real state server: the environment and every agent are clients
of it, agents cooperate over one execution, and each runtime differs only in how it manages context.

`run_simulation(address, SimConfig(...))` registers the project's warehouse skills if the server lacks them,
hydrates each agent's skill context P from the registry, creates the execution, and runs the agents against
the environment driver. Results: score, tokens per call and per step, every model call (JSONL if asked).
With `rezip` (the skillstate runtime only) the agents feed ReZip: they expand macros and report each
episode's outcome (runtime/rezip.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillstate.clients import ClientTLS, SkillRegistryClient, StateClient, open_channel

from ..envs import recovery, repo
from ..envs.base import Environment
from ..envs.driver import Driver
from ..envs.warehouse import WarehouseEnvironment, generate_events
from ..runtime.agent import Agent
from ..runtime.contexts import (
    RUNTIMES,
    Context,
    GroupChat,
    Memory,
    React,
    SkillState,
    Stateful,
    SummaryCapped,
    Truncated,
    Turn,
)
from ..runtime.llm import count_tokens, is_test_policy
from ..runtime.records import Limits, Recorder, StepRecord
from ..runtime.rezip import MacroFeedback, summarize
from ..runtime.transport import SESSION, check_transport
from ..scripted.memory import DEFAULT_RECALL
from ..scripted.policy import SCRIPTED, fault_rate
from .drift import state_drift
from .skills import SETTINGS, ensure_skills, hydrated_context

ENVIRONMENT = "environment"
"""The key of the environment driver's token in `run_simulation(tokens=...)`."""


@dataclass(frozen=True)
class SimConfig:
    env: str = "warehouse"
    agents: int = 3
    """3: one agent per skill (receiving, shipping, maintenance); 1: one agent running all three."""
    horizon: int = 100
    runtime: str = "skillstate"
    noise: int = 0
    """Irrelevant telemetry lines per observation."""
    seed: int = 0
    model: str = SCRIPTED
    window_tokens: int = 2000
    """The prompt budget of the truncated and summary runtimes (the largest SKILL.state prompt, in the paper)."""
    context_budget: int = 3000
    """Tokens of hydrated skill context per agent (P)."""
    limits: Limits = field(default_factory=Limits)
    scenario: str | None = None
    """A state-recovery scenario (repo: force-push, flaky-ci, pr-closed; warehouse: secret-audit, secret-barcode,
    secret-move, canceled-order)."""
    constrained: bool = False
    """JSON-schema-constrained output for every runtime (models that support it); off: free reasoning, as the
    paper runs them."""
    reply_words: int | None = None
    """Words of reasoning in every answer of the scripted test policy (None: its own 30-90); test policy only."""
    recall: float = DEFAULT_RECALL
    """The scripted test policy's chance of recalling each fact only a transcript or a summary gives, at each
    step (scripted/policy.py, `recalled`); 1: a perfect replay. Test policy only."""
    result_limit: int | None = None
    """Characters of an action's result an observation carries; a longer result is cut, and the agent is
    told (None: never cut)."""
    transport: str = SESSION
    """How every agent reaches the server: one session each (`session`), or unary calls (`unary`)."""
    rezip: bool = False
    """The agents feed ReZip (runtime/rezip.py): they may expand macros and report each episode's outcome. Off by
    default, and refused for the baselines: reports revise the library, and runtimes compared must see the same P."""

    def __post_init__(self) -> None:
        if self.env not in SETTINGS:
            raise ValueError(f"env: unknown environment {self.env!r} (one of {', '.join(SETTINGS)})")
        scenarios = repo.SCENARIOS if self.env == "repo" else recovery.SCENARIOS
        if self.scenario is not None and self.scenario not in scenarios:
            raise ValueError(f"scenario: {self.scenario!r} is not a scenario of {self.env} "
                             f"(it has {', '.join(scenarios)})")  # fmt: skip
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime: unknown runtime {self.runtime!r} (one of {', '.join(RUNTIMES)})")
        if self.agents not in (1, 3):
            raise ValueError(f"agents: the {self.env} runs 1 or 3 agents, not {self.agents}")
        if self.result_limit is not None and self.result_limit < 1:
            raise ValueError("result_limit must be at least 1 character")
        check_transport(self.transport)
        if self.rezip and self.runtime != "skillstate":
            raise ValueError(f"rezip: the {self.runtime} runtime is a baseline, which must see the same P as the "
                             "runtime it is compared with: rezip runs the skillstate runtime only")  # fmt: skip
        if self.horizon < 1 or self.noise < 0:
            raise ValueError("horizon must be at least 1 and noise at least 0")
        if is_test_policy(self.model):
            fault_rate(self.model)  # raises for an unknown test policy
        elif self.reply_words is not None:
            raise ValueError("reply_words: only the scripted test policy's reply length can be set")
        if self.reply_words is not None and self.reply_words < 1:
            raise ValueError("reply_words must be at least 1")
        if not 0 <= self.recall <= 1:
            raise ValueError(f"recall: {self.recall} is a probability (0 to 1)")


@dataclass
class SimResult:
    config: SimConfig
    score: float
    handled: int
    events: int
    records: list[StepRecord] = field(default_factory=list)
    execution_id: str = ""
    world: dict[str, Any] = field(default_factory=dict)
    """The environment's world at the end, as JSON: what the shared state should describe."""
    recovery: dict[str, Any] | None = None
    """The state-recovery scenario's outcome, if one ran."""
    state_drift: list[str] | None = None
    """Where Σ and the world's ground truth disagree at the end (JSON Pointers; None for a runtime that keeps no
    Σ): the errors that leaked past validation and rollback."""
    rezip: dict[str, Any] | None = None
    """With `rezip`: the macros each agent expanded, the reports' revisions and any report refused."""

    @property
    def calls(self) -> int:
        return sum(r.outcome != "gave_up" for r in self.records)

    @property
    def prompt_sizes(self) -> list[int]:
        return [r.prompt_tokens for r in self.records if r.outcome != "gave_up"]

    @property
    def average_prompt_tokens(self) -> float:
        return statistics.fmean(self.prompt_sizes) if self.prompt_sizes else 0.0

    @property
    def total_tokens(self) -> int:
        return sum(r.prompt_tokens + r.completion_tokens for r in self.records)

    def cumulative_tokens(self) -> list[int]:
        """Total tokens spent by the end of each event step (every model call of the run, in order)."""
        by_step: dict[tuple[str, int], int] = {}
        for record in self.records:
            key = (record.agent, record.step)
            by_step[key] = by_step.get(key, 0) + record.prompt_tokens + record.completion_tokens
        return list(itertools.accumulate(by_step.values()))

    def retries(self) -> dict[str, int]:
        """Model calls that lost a conflict, were refused (`invalid`) or broke the format (`malformed`), steps
        given up, and steps `recovered`: asked again after a refused or malformed reply, and then applied."""
        counts = {"conflict": 0, "invalid": 0, "malformed": 0, "gave_up": 0}
        outcomes: dict[tuple[str, int], set[str]] = {}
        for record in self.records:
            if record.outcome in counts:
                counts[record.outcome] += 1
            outcomes.setdefault((record.agent, record.step), set()).add(record.outcome)
        recovered = sum("applied" in seen and bool(seen & {"invalid", "malformed"}) for seen in outcomes.values())
        return counts | {"recovered": recovered}

    def summary(self) -> dict[str, Any]:
        return (
            {
                "runtime": self.config.runtime,
                "agents": self.config.agents,
                "horizon": self.config.horizon,
                "noise": self.config.noise,
                "seed": self.config.seed,
                "model": self.config.model,
                "reply_words": self.config.reply_words,
                "recall": self.config.recall if is_test_policy(self.config.model) else None,
                "score": round(self.score, 4),
                "handled": self.handled,
                "events": self.events,
                "calls": self.calls,
                "average_prompt_tokens": round(self.average_prompt_tokens, 1),
                "max_prompt_tokens": max(self.prompt_sizes, default=0),
                "median_prompt_tokens": statistics.median(self.prompt_sizes) if self.prompt_sizes else 0,
                "total_tokens": self.total_tokens,
                "cached_prompt_tokens": sum(r.cached_prompt_tokens for r in self.records),
                "retries": self.retries(),
            }
            | ({"recovery": self.recovery} if self.recovery else {})
            | {"state_drift": self.state_drift}
            | ({"rezip": self.rezip} if self.rezip is not None else {})
            | ({"env": self.config.env})
        )


async def run_simulation(
    address: str,
    config: SimConfig,
    *,
    jsonl: Path | None = None,
    on_event: Callable[[int], None] | None = None,
    tokens: Mapping[str, str] | None = None,
    tls: ClientTLS | None = None,
) -> SimResult:
    """Run one simulation against the server at `address` (host:port).

    On a server that requires credentials, `tokens` maps each agent id to its own token and `ENVIRONMENT`
    to the token of the environment driver, which also creates the execution and registers the skills
    (rights: admin, publish, read, registry). Each agent then calls the server as itself.
    """
    recorder = Recorder(jsonl)
    setting = SETTINGS[config.env]
    tokens = tokens or {}
    async with contextlib.AsyncExitStack() as stack:
        channel = open_channel(address, token=tokens.get(ENVIRONMENT), tls=tls)
        stack.push_async_callback(channel.close)
        client, registry = StateClient(channel=channel), SkillRegistryClient(channel=channel)
        await ensure_skills(registry, setting.skills)
        execution = await client.create_execution(schema=setting.schema, initial_state=setting.initial)
        team: dict[str, str | tuple[str, ...]] = (
            dict(setting.team) if config.agents == 3 else {config.env: setting.skills}
        )
        conversation: list[Turn] = []
        agents = []
        for agent_id, skills in team.items():
            names = (skills,) if isinstance(skills, str) else tuple(skills)
            context = make_context(config, agent_id, conversation)
            instructions, reads, hydrations = await hydrated_context(
                registry, names, config.context_budget, has_state=context.writes_state
            )
            own, own_registry = client, registry
            if agent_id in tokens:
                own = await stack.enter_async_context(StateClient(address, token=tokens[agent_id], tls=tls))
                if config.rezip:  # Expand and ReportOutcome as the agent too
                    own_registry = await stack.enter_async_context(
                        SkillRegistryClient(address, token=tokens[agent_id], tls=tls)
                    )
            agents.append(
                Agent(
                    own,
                    execution.execution_id,
                    agent_id,
                    skills=names,
                    instructions=instructions,
                    model=config.model,
                    context=context,
                    recorder=recorder,
                    limits=config.limits,
                    reads=reads,
                    policy_options=_policy_options(config),
                    constrained=config.constrained,
                    transport=config.transport,
                    feedback=MacroFeedback(own_registry, hydrations) if config.rezip else None,
                )
            )
        running = [asyncio.create_task(agent.run(), name=f"agent-{agent.agent_id}") for agent in agents]
        answering: dict[str, list[asyncio.Future[Any]]] = {}
        for agent, its_run in zip(agents, running, strict=True):
            for address in (agent.agent_id, *(f"skill:{skill}" for skill in agent.skills)):
                answering.setdefault(address, []).append(its_run)
        environment = make_environment(config)
        driver = Driver(
            client,
            execution.execution_id,
            environment,
            [agent.agent_id for agent in agents],
            noise=config.noise,
            seed=config.seed,
            result_limit=config.result_limit,
            on_step=on_event,
            answering=answering,
        )
        driving = asyncio.create_task(driver.run(), name="environment")
        try:
            await _until_done_or_failed([driving, *running])
            outcome = driving.result()
        finally:
            for task in (driving, *running):
                task.cancel()
            recorder.close()
        final = await client.get_state(execution.execution_id)
    writes_state = agents[0].context.writes_state
    return SimResult(
        config,
        outcome.score,
        outcome.handled,
        outcome.tasks,
        recorder.records,
        execution.execution_id,
        environment.snapshot(),
        _recovery(environment),
        state_drift(final.state, environment.snapshot()) if writes_state else None,
        _rezip(agents) if config.rezip else None,
    )


def _rezip(agents: list[Agent]) -> dict[str, Any]:
    """What the agents told ReZip (rezip.summarize)."""
    return summarize({agent.agent_id: agent.feedback.summary() for agent in agents if agent.feedback is not None})


def _recovery(environment: Environment) -> dict[str, Any] | None:
    if isinstance(environment, repo.RepoEnvironment):
        return environment.recovery()
    if isinstance(environment, WarehouseEnvironment) and environment.recovery is not None:
        return environment.recovery.result()
    return None


def make_environment(config: SimConfig) -> Environment:
    if config.env == "repo":
        return repo.RepoEnvironment(config.horizon, config.seed, config.scenario)
    return WarehouseEnvironment(generate_events(config.horizon, config.seed), scenario=config.scenario)


async def _until_done_or_failed(tasks: list[asyncio.Task[Any]]) -> None:
    """Wait for every task; the first to fail cancels the rest and its error is raised (an agent that dies
    must not leave the environment waiting for its action)."""
    pending: set[asyncio.Task[Any]] = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]


def make_context(config: SimConfig, agent_id: str, conversation: list[Turn]) -> Context:
    if config.runtime == "skillstate":
        return SkillState()
    if config.runtime == "react":
        return React()
    if config.runtime == "memory":
        return Memory()
    if config.runtime == "stateful":
        return Stateful()
    if config.runtime == "truncated":
        return Truncated(budget_tokens=config.window_tokens, count_tokens=lambda text: count_tokens(config.model, text))
    if config.runtime == "summary":
        return SummaryCapped(
            budget_tokens=config.window_tokens, count_tokens=lambda text: count_tokens(config.model, text)
        )
    return GroupChat(agent_id, conversation)


def _policy_options(config: SimConfig) -> dict[str, Any] | None:
    """What the scripted test policy is told (nothing for a real model)."""
    if not is_test_policy(config.model):
        return None
    return {"recall": config.recall} | ({"reply_words": config.reply_words} if config.reply_words else {})
