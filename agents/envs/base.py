"""What an environment gives the driver: observations to publish, and the outcome of each action."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Outcome:
    """What executing one action did: the observation's `last_action`."""

    action: str
    status: str
    """`ok` or `error`."""
    result: str
    handled: bool
    """Whether it did what the observation it answered asked for."""

    def payload(self) -> dict[str, str]:
        return {"action": self.action, "status": self.status, "result": self.result}


@dataclass(frozen=True)
class Notice:
    """One observation to publish: to a skill's agents (`skill` set) or to one agent."""

    skill: str
    text: str
    subject: Any = None
    """What the environment needs to judge the answer (an event, a pull request)."""


class Environment(Protocol):
    skills: tuple[str, ...]
    """The skills whose agents it addresses."""

    def next_notice(self) -> Notice | None:
        """The next observation, or None when the run is over."""

    def act(self, notice: Notice, action: str) -> Outcome:
        """Validate and execute the action that answered `notice`."""

    def telemetry(self, rng: random.Random, count: int) -> list[str]:
        """Irrelevant background lines (noise injection)."""

    def score(self) -> tuple[int, int]:
        """(successes, actionable tasks)."""

    def snapshot(self) -> dict[str, Any]:
        """The world as JSON: what the agents' shared state should describe."""
