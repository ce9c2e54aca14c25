"""SKILL.state agents over one shared execution, the baseline runtimes they are compared with, and the
environments and simulations that score them (docs/agents.md).

result = await run_simulation("127.0.0.1:50051", SimConfig(env="warehouse", runtime="skillstate"))
print(result.summary())

Importing this package loads neither litellm (imported at the first model call) nor matplotlib (at the first
plot).
"""

from .contexts import RUNTIMES, Context, GroupChat, Memory, React, SkillState, Stateful, Truncated
from .envs.base import Environment, Notice, Outcome
from .envs.driver import Driver
from .envs.repo import RepoEnvironment
from .envs.warehouse import WarehouseEnvironment
from .llm import is_test_policy
from .runtime import Agent, Limits, Recorder, StepRecord
from .scripted import SCRIPTED
from .sim import ENVIRONMENT, SimConfig, SimResult, run_simulation

__all__ = [
    "ENVIRONMENT",
    "RUNTIMES",
    "SCRIPTED",
    "Agent",
    "Context",
    "Driver",
    "Environment",
    "GroupChat",
    "Limits",
    "Memory",
    "Notice",
    "Outcome",
    "React",
    "Recorder",
    "RepoEnvironment",
    "SimConfig",
    "SimResult",
    "SkillState",
    "Stateful",
    "StepRecord",
    "Truncated",
    "WarehouseEnvironment",
    "is_test_policy",
    "run_simulation",
]
