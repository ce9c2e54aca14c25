"""A timed world as a client of the state server, never waiting for any agent.

Every tick it writes the tick to Σ (`clock`, under `max`: leases are read against it) and publishes the
events that are due to `skill:NAME`. It follows the execution's committed revisions: each revision whose
action names an event (`{"event": ..., "do": ...}`) is run on the world in commit order, and its outcome is
published to the agent that wrote it. A refused patch never commits, so its action never reaches the world.
An agent that gives an event up hands it back (`{"event": ..., "hand_back": true}`): the world announces it
to its skill again, with its first deadline, saying who handed it back (`handed_back_by`).
It counts, by policy, the concurrent writes the server merged into the agents' revisions on the world's
data (their `resolutions` under `data_keys`; the clock's merges are the world's, and the agents' claims
are theirs, not counted).
The run ends when every event is handled; when, past the last event's deadline, no event was handled for
`grace` ticks (the agents are stuck or the rest cannot be handled); or after `timeout` seconds. Then every
agent is told it is done.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillstate.clients import RevisionEvent, Snapshot, StateClient

from .clock import Clock, Pace
from .timed import Arrival, TimedWorld

SOURCE = "environment"
FINISH_TIMEOUT = 30.0
"""Seconds `finish` waits for the next committed revision before it gives up on the rest."""


@dataclass
class EventRecord:
    """What became of one event."""

    arrival: Arrival
    announced_tick: int
    announced_at: float
    handled_tick: int | None = None
    handled_at: float | None = None
    handled_by: str = ""
    actions: int = 0
    """Actions that named it (a failed action and its retry are two)."""
    actions_after_handled: int = 0
    """Actions that named it once it had been handled: each one acted twice."""
    handed_back: int = 0
    """How often an agent gave it up and the world announced it again."""

    @property
    def on_time(self) -> bool:
        return self.handled_tick is not None and self.handled_tick <= self.arrival.deadline

    @property
    def latency_ticks(self) -> int | None:
        return None if self.handled_tick is None else self.handled_tick - self.arrival.tick


@dataclass
class TimedRun:
    events: dict[str, EventRecord] = field(default_factory=dict)
    ticks: int = 0
    """The ticks the run lasted."""
    started_at: float = 0.0
    tick_seconds: float = 0.1
    timed_out: bool = False
    expected: int = 0
    """The events the world had announced or still had to announce when the run ended."""
    resolutions: collections.Counter[str] = field(default_factory=collections.Counter)
    """policy -> paths of the agents' revisions where the server merged concurrent writes"""


class TimedDriver:
    def __init__(
        self,
        client: StateClient,
        execution_id: str,
        world: TimedWorld,
        pace: Pace,
        agents: Sequence[str],
        *,
        grace: int | None = None,
        timeout: float = 600.0,
        on_tick: Callable[[int, TimedRun], None] | None = None,
        data_keys: Collection[str] | None = None,
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.world = world
        self.pace = pace
        self.agents = list(agents)
        self.grace = pace.deadline if grace is None else grace
        self.timeout = timeout
        self.on_tick = on_tick
        self.data_keys = data_keys
        """The top-level keys of Σ whose merges are counted (None: all)."""
        self.run_record = TimedRun(tick_seconds=pace.tick_ms / 1000)
        self._follower: asyncio.Task[None] | None = None
        self._through = 0
        """The last revision whose action (if any) the world ran."""
        self._progress = asyncio.Event()

    async def run(self) -> TimedRun:
        """Run the clock until the run is over, then tell every agent it is done. The world goes on running
        the actions that commit until `finish`: every committed action takes effect."""
        record = self.run_record
        head = (await self.client.get_state(self.execution_id)).revision
        clock = Clock(self.pace)
        record.started_at = time.time()
        self._follower = asyncio.create_task(self._follow(head, clock))
        tick = 0
        try:
            while not self._over(tick, clock):
                tick += 1
                await clock.until(tick)
                written = await self.client.submit_patch(
                    self.execution_id, {"clock": tick}, agent_id=SOURCE, base_revision=head
                )
                head = written.revision  # stale by the agents' commits since: `max` merges it
                for arrival in self.world.due(tick):
                    await self._announce(arrival, tick)
                if self._follower.done():
                    self._follower.result()  # its error, if it failed
                if self.on_tick is not None:
                    self.on_tick(tick, record)
        except BaseException:
            self._follower.cancel()
            raise
        record.ticks, record.expected = tick, self.world.events
        for agent in self.agents:
            await self.client.publish_observation(self.execution_id, agent, {"done": True}, source=SOURCE, kind="done")
        return record

    async def finish(self) -> None:
        """Once the agents have stopped: run the actions of every revision committed so far, then stop."""
        assert self._follower is not None, "finish after run"
        head = (await self.client.get_state(self.execution_id)).revision
        try:
            while self._through < head:
                if self._follower.done():
                    self._follower.result()
                    return
                self._progress.clear()
                await asyncio.wait_for(self._progress.wait(), FINISH_TIMEOUT)
        finally:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    def _over(self, tick: int, clock: Clock) -> bool:
        """Every event handled; or, once the last event's deadline has passed, no event handled for `grace`
        ticks (what is left then is dropped); or the time is up."""
        events = self.run_record.events.values()
        if tick and not self.world.unannounced() and all(e.handled_tick is not None for e in events):
            return True
        last_handled = max((e.handled_tick or 0 for e in events), default=0)
        if tick > self.world.last_tick + self.pace.deadline and tick - last_handled > self.grace:
            return True
        if time.monotonic() - clock.started > self.timeout:
            self.run_record.timed_out = True
            return True
        return False

    async def _announce(self, arrival: Arrival, tick: int) -> None:
        self.run_record.events[arrival.event_id] = EventRecord(arrival, tick, time.time())
        await self._publish(arrival, tick)

    async def _publish(self, arrival: Arrival, tick: int, **more: Any) -> None:
        payload = {"event": arrival.text, "event_id": arrival.event_id, "tick": tick, "deadline": arrival.deadline}
        payload.update(more)
        await self.client.publish_observation(
            self.execution_id, f"skill:{arrival.skill}", payload, source=SOURCE, kind="event"
        )

    async def _follow(self, after_revision: int, clock: Clock) -> None:
        """Run the action of every committed revision that answers an event, in commit order."""
        async for revision in self.client.watch(self.execution_id, after_revision):
            if isinstance(revision, Snapshot):
                continue
            if revision.agent_id != SOURCE:
                self.run_record.resolutions.update(r.policy for r in revision.resolutions if self._on_data(r.path))
            await self._apply(revision, clock)
            self._through = revision.revision
            self._progress.set()

    async def _apply(self, revision: RevisionEvent, clock: Clock) -> None:
        """Run a revision's action on the world, if it answers an announced event, and report the outcome."""
        if (handed_back := self._handed_back(revision)) is not None:
            if handed_back.handled_tick is None:
                handed_back.handed_back += 1
                await self._publish(handed_back.arrival, clock.now(), handed_back_by=revision.agent_id)
            return
        action = _event_action(revision)
        event = self.run_record.events.get(action[0]) if action is not None else None
        if action is None or event is None:
            return  # an action naming no announced event changes nothing
        event_id, command = action
        event.actions += 1
        if event.handled_tick is not None:
            event.actions_after_handled += 1
        outcome = self.world.act(event_id, command)
        if outcome.handled and event.handled_tick is None:
            event.handled_tick, event.handled_at, event.handled_by = clock.now(), time.time(), revision.agent_id
        payload: dict[str, Any] = {
            "event": event.arrival.text,
            "event_id": event_id,
            "handled": outcome.handled,
            "last_action": outcome.payload(),
        }
        await self.client.publish_observation(
            self.execution_id, revision.agent_id, payload, source=SOURCE, kind="outcome"
        )

    def _on_data(self, path: str) -> bool:
        return self.data_keys is None or path.split("/")[1] in self.data_keys

    def _handed_back(self, revision: RevisionEvent) -> EventRecord | None:
        """The announced event a revision's action hands back, if it does."""
        action = revision.action
        if isinstance(action, dict) and action.get("hand_back") is True and isinstance(action.get("event"), str):
            return self.run_record.events.get(action["event"])
        return None


def _event_action(revision: RevisionEvent) -> tuple[str, str] | None:
    action = revision.action
    if isinstance(action, dict) and isinstance(action.get("event"), str) and isinstance(action.get("do"), str):
        return action["event"], action["do"]
    return None
