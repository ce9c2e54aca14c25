"""The warehouse as a client of the state server: it publishes each event to the agents whose skill handles
it (`skill:warehouse-receiving`, ...), takes the action of the revision that answers it from the watch
stream, executes it on the world, and reports the outcome with that agent's next observation.

Events are handled one at a time, in order, so a seeded run repeats exactly. The observation is informative:
the action just executed, its status and its full result (or, with `result_limit`, a cut the agent is told
about), then the new event, then any background telemetry.
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from skillstate.clients import RevisionEvent, Snapshot, StateClient

from .warehouse import Event, Outcome, Warehouse, telemetry

SOURCE = "warehouse"


@dataclass
class DriverResult:
    events: int
    handled: int
    outcomes: list[tuple[Event, str, Outcome]] = field(default_factory=list)
    """(event, agent, outcome) for every event, in order."""

    @property
    def score(self) -> float:
        return self.handled / self.events if self.events else 1.0


class WarehouseDriver:
    def __init__(
        self,
        client: StateClient,
        execution_id: str,
        events: Sequence[Event],
        agents: Sequence[str],
        *,
        route: Callable[[Event], str] = lambda event: f"skill:{event.skill}",
        noise: int = 0,
        seed: int = 0,
        result_limit: int | None = None,
        on_event: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.events = list(events)
        self.agents = list(agents)
        self.route = route
        self.noise = noise
        self.noise_rng = random.Random(f"telemetry:{seed}")
        self.result_limit = result_limit
        self.on_event = on_event
        """Called with the number of events handled so far (a progress bar)."""
        self.world = Warehouse()
        self._last: dict[str, Outcome] = {}
        """agent -> the outcome of its latest action, not yet reported to it"""
        self._agent_of: dict[str, str] = {}
        """address -> the agent that answered it last"""

    async def run(self) -> DriverResult:
        result = DriverResult(len(self.events), 0)
        head = (await self.client.get_state(self.execution_id)).revision
        async with aclosing(self._actions(head)) as actions:
            for event in self.events:
                address = self.route(event)
                payload = {"event": self.world.alert(event), **self._last_action(self._agent_of.get(address))}
                if self.noise:
                    payload["telemetry"] = telemetry(self.noise_rng, self.noise)
                await self.client.publish_observation(self.execution_id, address, payload, source=SOURCE, kind="event")
                agent, action = await anext(actions)
                outcome = self.world.execute(action, event)
                self._agent_of[address], self._last[agent] = agent, outcome
                result.handled += outcome.handled
                result.outcomes.append((event, agent, outcome))
                if self.on_event is not None:
                    self.on_event(len(result.outcomes))
            for agent in self.agents:
                payload = {"done": True, **self._last_action(agent)}
                await self.client.publish_observation(self.execution_id, agent, payload, source=SOURCE, kind="done")
            for _ in self.agents:  # every agent answers the end (with Finish, or Wait when it gave up)
                await anext(actions)
        return result

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
