"""An environment as a client of the state server: it publishes each observation to the agents whose skill
handles it (`skill:warehouse-receiving`, ...), takes the action of the revision that answers it from the
watch stream, executes it on the world, and reports the outcome with that agent's next observation.

Observations are handled one at a time, in order, so a seeded run repeats exactly. The observation is
informative: the action just executed, its status and its full result (or, with `result_limit`, a cut the
agent is told about), then the new event, then any background telemetry.
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from skillstate.clients import RevisionEvent, Snapshot, StateClient

from .base import Environment, Notice, Outcome

SOURCE = "environment"


@dataclass
class DriverResult:
    handled: int
    tasks: int
    outcomes: list[tuple[Notice, str, Outcome]] = field(default_factory=list)
    """(observation, agent, outcome) for every step, in order."""

    @property
    def steps(self) -> int:
        return len(self.outcomes)

    @property
    def score(self) -> float:
        return self.handled / self.tasks if self.tasks else 1.0


class Driver:
    def __init__(
        self,
        client: StateClient,
        execution_id: str,
        environment: Environment,
        agents: Sequence[str],
        *,
        noise: int = 0,
        seed: int = 0,
        result_limit: int | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.environment = environment
        self.agents = list(agents)
        self.noise = noise
        self.noise_rng = random.Random(f"telemetry:{seed}")
        self.result_limit = result_limit
        self.on_step = on_step
        """Called with the number of observations handled so far (a progress bar)."""
        self._last: dict[str, Outcome] = {}
        """agent -> the outcome of its latest action, not yet reported to it"""
        self._agent_of: dict[str, str] = {}
        """address -> the agent that answered it last"""

    async def run(self) -> DriverResult:
        outcomes: list[tuple[Notice, str, Outcome]] = []
        head = (await self.client.get_state(self.execution_id)).revision
        async with aclosing(self._actions(head)) as actions:
            while (notice := self.environment.next_notice()) is not None:
                address = f"skill:{notice.skill}"
                payload = {"event": notice.text, **self._last_action(self._agent_of.get(address))}
                if self.noise:
                    payload["telemetry"] = self.environment.telemetry(self.noise_rng, self.noise)
                await self.client.publish_observation(self.execution_id, address, payload, source=SOURCE, kind="event")
                agent, action = await anext(actions)
                outcome = self.environment.act(notice, action)
                self._agent_of[address], self._last[agent] = agent, outcome
                outcomes.append((notice, agent, outcome))
                if self.on_step is not None:
                    self.on_step(len(outcomes))
            for agent in self.agents:  # one at a time, as every step: a run repeats exactly
                payload = {"done": True, **self._last_action(agent)}
                await self.client.publish_observation(self.execution_id, agent, payload, source=SOURCE, kind="done")
                await anext(actions)  # its answer to the end: Finish (or Wait, when it gave up)
        handled, tasks = self.environment.score()
        return DriverResult(handled, tasks, outcomes)

    def _last_action(self, agent: str | None) -> dict[str, Any]:
        outcome = self._last.pop(agent, None) if agent is not None else None
        if outcome is None:
            return {}
        reported: dict[str, Any] = dict(outcome.payload())
        if self.result_limit is not None and len(outcome.result) > self.result_limit:
            reported["result"] = outcome.result[: self.result_limit]
            reported["truncated"] = self.result_limit
        return {"last_action": reported}

    async def _actions(self, after_revision: int) -> AsyncGenerator[tuple[str, str], None]:
        """(agent, action) of every committed revision that carries an action."""
        async for revision in self.client.watch(self.execution_id, after_revision):
            if isinstance(revision, Snapshot) or not _has_action(revision):
                continue
            yield revision.agent_id, str(revision.action)


def _has_action(revision: RevisionEvent) -> bool:
    return isinstance(revision.action, str) and bool(revision.action)
