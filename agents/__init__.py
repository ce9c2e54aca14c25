"""SKILL.state agents over one shared execution, the baseline runtimes they are compared with, and the
environments and simulations that score them (docs/agents.md).

result = await run_simulation("127.0.0.1:50051", SimConfig(env="warehouse", runtime="skillstate"))
print(result.summary())

team = await run_team("127.0.0.1:50051", TeamConfig(agents_per_skill=4, pace=Pace(rate=1.5)))  # at once
print(team.summary())

Importing this package loads neither litellm (imported at the first model call) nor matplotlib (at the first
plot).
"""

from .envs.base import Environment, Notice, Outcome
from .envs.clock import Pace
from .envs.driver import Driver
from .envs.repo import RepoEnvironment
from .envs.warehouse import WarehouseEnvironment
from .runtime.agent import Agent
from .runtime.contexts import (
    RUNTIMES,
    Context,
    GroupChat,
    Memory,
    React,
    SkillState,
    Stateful,
    SummaryCapped,
    Truncated,
)
from .runtime.llm import is_test_policy
from .runtime.records import Limits, Recorder, StepRecord
from .runtime.rezip import MacroFeedback
from .scripted.policy import SCRIPTED
from .sims.concurrent import TeamResult, run_team
from .sims.drift import state_drift
from .sims.sequential import ENVIRONMENT, SimConfig, SimResult, run_simulation
from .sims.team_setup import TeamConfig
from .teams.agent import Coordination, TeamAgent

__all__ = [
    "ENVIRONMENT",
    "RUNTIMES",
    "SCRIPTED",
    "Agent",
    "Context",
    "Coordination",
    "Driver",
    "Environment",
    "GroupChat",
    "Limits",
    "MacroFeedback",
    "Memory",
    "Notice",
    "Outcome",
    "Pace",
    "React",
    "Recorder",
    "RepoEnvironment",
    "SimConfig",
    "SimResult",
    "SkillState",
    "Stateful",
    "StepRecord",
    "SummaryCapped",
    "TeamAgent",
    "TeamConfig",
    "TeamResult",
    "Truncated",
    "WarehouseEnvironment",
    "is_test_policy",
    "run_simulation",
    "run_team",
    "state_drift",
]
