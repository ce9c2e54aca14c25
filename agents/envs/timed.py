"""Worlds that run on their own clock (clock.py): events arrive on ticks, with deadlines, whatever the agents do.

A timed world says which events are due at a tick, runs the action that answers one, and describes itself
as JSON. The warehouse's is here: the same ground-truth events as the sequential run (warehouse.py), each
arriving at its tick. An event about an item is announced only once every earlier event about that item
was handled, and an order or a maintenance only once the item is on a shelf: a warehouse ships what it
holds. An event held back that way is late by as much (its deadline counts from its arrival).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Protocol

from .base import Outcome
from .warehouse import SHELVES, Event, EventKind, Warehouse


@dataclass(frozen=True)
class Arrival:
    """One event of a timed world, as announced."""

    event_id: str
    skill: str
    text: str
    tick: int
    """When it arrived (it may be announced later, when it had to wait for an earlier event)."""
    deadline: int
    """The tick by which it must be handled to be on time."""


class TimedWorld(Protocol):
    skills: tuple[str, ...]
    events: int
    last_tick: int
    """When the last event arrives."""

    def due(self, tick: int) -> list[Arrival]:
        """The events to announce now, in order (each once)."""

    def act(self, event_id: str, command: str) -> Outcome:
        """Run the command that answers an announced event."""

    def unannounced(self) -> int:
        """Events not announced yet."""

    def snapshot(self) -> dict[str, Any]:
        """The world as JSON: what the shared state should describe."""


class TimedWarehouse:
    """The warehouse's events at their ticks (a TimedWorld)."""

    skills: tuple[str, ...] = ("warehouse-receiving", "warehouse-shipping", "warehouse-maintenance")

    def __init__(self, events: list[Event], ticks: list[int], deadline: int, shelves: int = SHELVES) -> None:
        self.world = Warehouse(shelves)
        self.events = len(events)
        self.last_tick = max(ticks, default=0)
        self._coming = collections.deque(zip(events, ticks, strict=True))
        self._waiting: list[tuple[Event, int]] = []
        """Arrived, not announced: an earlier event about the item is open, or the item is not on a shelf."""
        self._open_items: collections.Counter[str] = collections.Counter()
        """Items with announced events not yet handled."""
        self._announced: dict[str, tuple[Event, Arrival]] = {}
        self._handled: set[str] = set()
        self._deadline = deadline

    def due(self, tick: int) -> list[Arrival]:
        while self._coming and self._coming[0][1] <= tick:
            self._waiting.append(self._coming.popleft())
        announced, blocked = [], set()
        for event, arrived in list(self._waiting):
            if event.item in blocked or not self._may_announce(event):
                blocked.add(event.item)  # later events of the item keep their order behind it
                continue
            self._waiting.remove((event, arrived))
            arrival = Arrival(
                f"e{event.index}", event.skill, self.world.alert(event), arrived, arrived + self._deadline
            )
            self._announced[arrival.event_id] = (event, arrival)
            self._open_items[event.item] += 1
            announced.append(arrival)
        return announced

    def _may_announce(self, event: Event) -> bool:
        if self._open_items[event.item]:
            return False
        return event.kind is EventKind.RECEIVE or self.world.location(event.item) is not None

    def act(self, event_id: str, command: str) -> Outcome:
        event, _ = self._announced[event_id]
        outcome = self.world.execute(command, event if event_id not in self._handled else None)
        if outcome.handled:
            self._handled.add(event_id)
            self._open_items[event.item] -= 1
        return outcome

    def unannounced(self) -> int:
        return len(self._coming) + len(self._waiting)

    def snapshot(self) -> dict[str, Any]:
        return {"inventory": dict(self.world.stock)}
