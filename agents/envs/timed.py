"""Worlds that run on their own clock (clock.py): events arrive on ticks, with deadlines, whatever the agents do.

A timed world says which events are due at a tick, runs the action that answers one, and keeps books that
Σ should agree with. The stockroom's is here (stockroom.py), each event arriving at its tick. A shipment is
announced as it arrives; an order once its units are on a shelf and no other open order counts on them (a
warehouse ships what it holds: a pair of orders waits until both can ship); a maintenance, which moves the
item, once its item has a shelf and no other event about it is open, and every event of the item waits while
it is open. So events about one item are open at once whenever that is safe, and a pair (contention) is
announced together unless its units are not on the shelf yet. An item's orders and maintenance keep their
order; an event held back is late by as much (its deadline counts from its arrival).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Protocol

from .base import Outcome
from .stockroom import STOCKROOM_SKILLS, StockEvent, Stockroom, believed
from .warehouse import SHELVES, EventKind


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
    last_tick: int
    """When the last event arrives."""

    @property
    def events(self) -> int:
        """Events announced or still to come (a world whose actions set off events counts more as it runs)."""

    def due(self, tick: int) -> list[Arrival]:
        """The events to announce now, in order (each once)."""

    def act(self, event_id: str, command: str) -> Outcome:
        """Run the command that answers an announced event."""

    def unannounced(self) -> int:
        """Events not announced yet."""

    def books(self) -> dict[str, Any]:
        """The world's books as JSON: what the shared state should say."""

    def believed(self, state: dict[str, Any]) -> dict[str, Any]:
        """What Σ says of the books, in their shape."""


class TimedStockroom:
    """The stockroom's events at their ticks (a TimedWorld); a pair's second event arrives with its first."""

    skills: tuple[str, ...] = STOCKROOM_SKILLS

    def __init__(self, events: list[StockEvent], ticks: list[int], deadline: int, shelves: int = SHELVES) -> None:
        self.world = Stockroom(shelves)
        self.events = len(events)
        ticks = list(ticks)
        for event in events:
            if event.partner is not None and event.partner < event.index:
                ticks[event.index] = ticks[event.partner]
        self.last_tick = max(ticks, default=0)
        self._coming = collections.deque(zip(events, ticks, strict=True))
        self._waiting: list[tuple[StockEvent, int]] = []
        """Arrived, not announced: an earlier event about the item is open, or its units are not on a shelf."""
        self._open: dict[str, set[int]] = collections.defaultdict(set)
        """item -> the indexes of its announced events not yet handled"""
        self._announced: dict[str, StockEvent] = {}
        self._by_index = {event.index: event for event in events}
        self._handled: set[str] = set()
        self._deadline = deadline

    def due(self, tick: int) -> list[Arrival]:
        while self._coming and self._coming[0][1] <= tick:
            self._waiting.append(self._coming.popleft())
        announced, blocked = [], set()
        for event, arrived in list(self._waiting):
            held_back = event.item in blocked and event.kind is not EventKind.RECEIVE
            if held_back or not self._may_announce(event):
                blocked.add(event.item)  # its later orders and maintenance keep their order behind it
                continue
            self._waiting.remove((event, arrived))
            arrival = Arrival(
                f"e{event.index}", event.skill, self.world.alert(event), arrived, arrived + self._deadline
            )
            self._announced[arrival.event_id] = event
            self._open[event.item].add(event.index)
            announced.append(arrival)
        return announced

    def _may_announce(self, event: StockEvent) -> bool:
        others = [self._by_index[i] for i in self._open[event.item]]
        if any(o.kind is EventKind.MAINTENANCE for o in others):
            return False  # the item is on its way to another shelf
        if event.kind is EventKind.MAINTENANCE:
            return not others and self.world.has_shelf(event.item)
        if event.kind is EventKind.ORDER:
            reserved = sum(o.units for o in others if o.kind is EventKind.ORDER)
            return self.world.units_on_shelf(event.item) - reserved >= event.units + self._partner_units(event)
        return True

    def _partner_units(self, event: StockEvent) -> int:
        """The units of the order paired with `event` and coming after it: the first of two orders is announced
        only when both can ship, so the pair goes out together."""
        partner = self._by_index.get(event.partner) if event.partner is not None else None
        if partner is None or partner.kind is not EventKind.ORDER or partner.index < event.index:
            return 0
        return partner.units

    def act(self, event_id: str, command: str) -> Outcome:
        event = self._announced[event_id]
        outcome = self.world.execute(command, event if event_id not in self._handled else None)
        if outcome.handled:
            self._handled.add(event_id)
            self._open[event.item].discard(event.index)
        return outcome

    def unannounced(self) -> int:
        return len(self._coming) + len(self._waiting)

    def books(self) -> dict[str, Any]:
        return self.world.books()

    def believed(self, state: dict[str, Any]) -> dict[str, Any]:
        return believed(state)
