"""An environment as a client of the state server: it publishes each observation to the agents whose skill
handles it (`skill:warehouse-receiving`, ...), takes the action of the revision that answers it from the
watch stream, executes it on the world, and reports the outcome with that agent's next observation.

Observations are handled one at a time, in order, so a seeded run repeats exactly. The observation is
informative: the action just executed, its status and its full result (or, with `result_limit`, a cut the
agent is told about), then the new event, then any background telemetry. An observation that no running
agent is left to answer (each that could said Finish and stopped) is not waited for: it counts as not
handled, and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from skillstate.clients import RevisionEvent, Snapshot, StateClient

from .base import Environment, Notice, Outcome

SOURCE = "environment"
UNANSWERED = Outcome("", "error", "No agent was left to answer.", False)


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
        answering: Mapping[str, Sequence[asyncio.Future[Any]]] | None = None,
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
        self.answering = answering
        """address (`skill:NAME`, or an agent id) -> the running agents that answer it (None: always wait)."""
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._through = 0
        self._read = asyncio.Event()

    async def run(self) -> DriverResult:
        outcomes: list[tuple[Notice, str, Outcome]] = []
        head = (await self.client.get_state(self.execution_id)).revision
        reader = asyncio.create_task(self._read_actions(head))
        try:
            while (notice := self.environment.next_notice()) is not None:
                address = f"skill:{notice.skill}"
                payload = {"event": notice.text, **self._last_action(self._agent_of.get(address))}
                if self.noise:
                    payload["telemetry"] = self.environment.telemetry(self.noise_rng, self.noise)
                await self.client.publish_observation(self.execution_id, address, payload, source=SOURCE, kind="event")
                answer = await self._answer(address, reader)
                if answer is None:
                    outcomes.append((notice, "", UNANSWERED))
                else:
                    agent, action = answer
                    outcome = self.environment.act(notice, action)
                    self._agent_of[address], self._last[agent] = agent, outcome
                    outcomes.append((notice, agent, outcome))
                if self.on_step is not None:
                    self.on_step(len(outcomes))
            for agent in self.agents:  # one at a time, as every step: a run repeats exactly
                payload = {"done": True, **self._last_action(agent)}
                await self.client.publish_observation(self.execution_id, agent, payload, source=SOURCE, kind="done")
                await self._answer(agent, reader)  # its answer to the end: Finish (or Wait, when it gave up)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        handled, tasks = self.environment.score()
        return DriverResult(handled, tasks, outcomes)

    async def _answer(self, address: str, reader: asyncio.Task[None]) -> tuple[str, str] | None:
        """The next action committed, or None once no running agent is left to answer `address` (and every
        revision committed by then has been read)."""
        while True:
            running = [] if self.answering is None else [a for a in self.answering.get(address, ()) if not a.done()]
            if self.answering is not None and not running:
                await self._read_through((await self.client.get_state(self.execution_id)).revision, reader)
                return None if self._queue.empty() else self._queue.get_nowait()
            taking = asyncio.ensure_future(self._queue.get())
            done, _ = await asyncio.wait([taking, reader, *running], return_when=asyncio.FIRST_COMPLETED)
            if taking in done:
                return taking.result()
            taking.cancel()
            if reader in done:
                reader.result()  # its error
                raise RuntimeError("the watch on the execution ended")

    async def _read_through(self, revision: int, reader: asyncio.Task[None]) -> None:
        while self._through < revision and not reader.done():
            self._read.clear()
            await self._read.wait()

    async def _read_actions(self, after_revision: int) -> None:
        async with aclosing(self._actions(after_revision)) as actions:
            async for action in actions:
                await self._queue.put(action)

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
            if not isinstance(revision, Snapshot) and _has_action(revision):
                yield revision.agent_id, str(revision.action)
            self._through = max(self._through, revision.revision)
            self._read.set()


def _has_action(revision: RevisionEvent) -> bool:
    return isinstance(revision.action, str) and bool(revision.action)
