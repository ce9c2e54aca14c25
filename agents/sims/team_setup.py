"""Who runs a concurrent simulation: its configuration (agents per skill, pace, faults), and the team of agents
it starts, in this process or in processes of their own (concurrent.py, workers.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..envs.clock import Pace
from ..runtime.llm import is_test_policy
from ..runtime.records import Limits
from ..runtime.transport import SESSION, check_transport
from ..scripted.memory import DEFAULT_RECALL
from ..scripted.policy import CORRUPTS, FINISHES_EARLY, FUMBLES, SCRIPTED, STALLS, fault_rate
from ..teams.agent import Coordination
from .team_worlds import TEAM_WORLDS, TeamWorld

TEAM_RUNTIMES = ("skillstate", "groupchat")
COORDINATIONS = ("claims", "groups")
FAULTS = {"stall": STALLS, "die": None, "finish": FINISHES_EARLY, "corrupt": CORRUPTS, "fumble": FUMBLES}
"""Faulty agents a run may add, each in place of the last agent of a skill (in skill order): a test policy
that stalls, says Finish early, records wrong state or (in the stockroom) acts wrongly, and `die`, an agent
that crashes holding a claim."""


@dataclass(frozen=True)
class TeamConfig:
    agents_per_skill: int = 2
    env: str = "warehouse"
    """The world (team_worlds.py): the stockroom (`warehouse`) or the repository (`repo`), on their clocks."""
    horizon: int = 100
    """Events."""
    runtime: str = "skillstate"
    coordination: str = "claims"
    """How agents of a skill share its events: claims in Σ only, or the skill's consumer group too."""
    pace: Pace = field(default_factory=Pace)
    think_ms: float = 300.0
    """The test policy's time per call (a fast hosted model's latency); a real model takes its own."""
    lease_ticks: int = 10
    seed: int = 0
    contention: float = 0.2
    """The stockroom's chance that an event comes with a second about the same item, announced at once."""
    policies: dict[str, str] = field(default_factory=dict)
    """Merge policies that replace the world's designed ones (`TeamWorld.policies`) for some keys: a broken
    design, for tests and for comparison."""
    model: str = SCRIPTED
    recall: float = DEFAULT_RECALL
    """The scripted test policy's chance of recalling each fact only a transcript gives (scripted/memory.py):
    the group chat's; Σ is read exactly. Test policy only."""
    faults: tuple[str, ...] = ()
    context_budget: int = 3000
    limits: Limits = field(default_factory=Limits)
    timeout: float = 600.0
    """Seconds after which the run ends whatever is left."""
    finish_wait: float = 30.0
    """Seconds agents get to stop once the world is done (taking back what failed may need a model call);
    a stalled one is then cancelled and counted. Agents that stop sooner end the wait."""
    hold_seconds: float = 30.0
    """How long an agent keeps renewing its claim during one model call (`Coordination.hold_seconds`)."""
    processes: bool = False
    """Each agent in its own OS process (skillstate runtime only)."""
    transport: str = SESSION
    """How every agent (and the group chat's floor) reaches the server: one session each, or unary calls."""
    rezip: bool = False
    """Each agent feeds ReZip over a P hydrated for it alone (team_rezip.py); skillstate runtime only: reports
    revise the library, and the group chat it is compared with must see the same P."""

    def __post_init__(self) -> None:
        if self.env not in TEAM_WORLDS:
            raise ValueError(f"env: {self.env!r} has no world on a clock (one of {', '.join(TEAM_WORLDS)})")
        if self.runtime not in TEAM_RUNTIMES:
            raise ValueError(f"runtime: {self.runtime!r} does not run concurrently (one of {', '.join(TEAM_RUNTIMES)})")
        if self.coordination not in COORDINATIONS:
            raise ValueError(f"coordination: one of {', '.join(COORDINATIONS)}, not {self.coordination!r}")
        if not 1 <= self.agents_per_skill <= 64 or self.horizon < 1:
            raise ValueError("agents_per_skill must be 1..64 and horizon at least 1")
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown or len(self.faults) > len(self.world.skills) * self.agents_per_skill - 1:
            raise ValueError(
                f"faults: {unknown or self.faults} (each one of {', '.join(FAULTS)}, fewer than the agents)"
            )
        if not 1 <= self.lease_ticks < self.pace.deadline:
            raise ValueError(
                f"lease_ticks: {self.lease_ticks} must be at least 1 and shorter than the deadline "
                f"({self.pace.deadline} ticks), or no event could be taken over in time"
            )
        check_transport(self.transport)
        if not 0 <= self.contention <= 1:
            raise ValueError(f"contention: {self.contention} is a probability (0 to 1)")
        if self.finish_wait <= 0 or self.hold_seconds <= 0:
            raise ValueError(f"finish_wait ({self.finish_wait}) and hold_seconds ({self.hold_seconds}) are seconds, "
                             "more than 0")  # fmt: skip
        if not 0 <= self.recall <= 1:
            raise ValueError(f"recall: {self.recall} is a probability (0 to 1)")
        if unknown_keys := sorted(set(self.policies) - set(self.world.policies)):
            raise ValueError(f"policies: {unknown_keys} are not keys of the {self.env}'s state "
                             f"({', '.join(self.world.policies)})")  # fmt: skip
        if "fumble" in self.faults and self.env != "warehouse":
            raise ValueError("faults: fumble misreads the stockroom's events only (env warehouse)")
        if self.processes and self.runtime != "skillstate":
            raise ValueError("processes: only skillstate agents run in processes of their own")
        if self.rezip and self.runtime != "skillstate":
            raise ValueError(f"rezip: the {self.runtime} runtime is a baseline, which must see the same P as the "
                             "runtime it is compared with: rezip runs the skillstate runtime only")  # fmt: skip
        if is_test_policy(self.model):
            fault_rate(self.model)

    @property
    def world(self) -> TeamWorld:
        return TEAM_WORLDS[self.env]

    @property
    def agent_ids(self) -> list[str]:
        return [f"{skill}-{i}" for skill in self.world.skills for i in range(self.agents_per_skill)]

    def model_of(self, agent_id: str) -> str:
        """The model an agent calls: its faulty test policy, if it was given one, else the run's."""
        return FAULTS.get(self.faulty().get(agent_id, "")) or self.model

    def coordination_of(self, agent_id: str) -> Coordination:
        """How an agent shares its skill's events with the others (the `die` fault included)."""
        return Coordination(
            group=self.coordination == "groups",
            lease_ticks=self.lease_ticks,
            tick_ms=self.pace.tick_ms,
            die_after=1 if self.faulty().get(agent_id) == "die" else None,
            hold_seconds=self.hold_seconds,
            journal=True,
        )

    def policy_of(self, key: str) -> str:
        """The merge policy of a top-level key of Σ in this run."""
        return self.policies.get(key) or self.world.policies.get(key, "reject")

    def faulty(self) -> dict[str, str]:
        """agent id -> the fault it was given."""
        by_skill = [[f"{skill}-{i}" for i in reversed(range(self.agents_per_skill))] for skill in self.world.skills]
        order = [agent for row in zip(*by_skill, strict=True) for agent in row]  # the last of each skill first
        return dict(zip(order, self.faults, strict=False))


@dataclass
class Team:
    """The running agents: a task for each (or for the group chat's floor), and what coordination cost them."""

    tasks: dict[asyncio.Future[Any], str]
    """task -> the agent id it runs ("floor" for the group chat)."""
    counts: Callable[[], dict[str, int]]
    """Called once, when every agent has ended."""
    ready: Callable[[], Awaitable[None]]
    """Returns once every agent receives what is published (the run's start reached it)."""
    told: Callable[[], dict[str, dict[str, Any]]] = dict
    """Called once, when every agent has ended: agent id -> what it told ReZip (`MacroFeedback.summary()`), for
    the agents that reported (`rezip`)."""


def policy_options(config: TeamConfig) -> dict[str, Any]:
    """What the scripted test policy is told (nothing for a real model)."""
    return {"think_ms": config.think_ms, "recall": config.recall} if is_test_policy(config.model) else {}
