"""The warehouse of SkillExecBench (the SKILL.state paper, Appendix B.1): 500 shelves, each empty or holding one
item; events Receive, Order and Maintenance from a seeded generator; actions Store, Ship, Move and Wait.

The events come from a ground-truth simulation (the paper's Algorithm 2), so every runtime sees the same
items arrive, the same items ordered and the same items needing a shelf change, in the same order. Where an
event names a shelf (maintenance), it names the shelf the item is on in the agents' world, which can differ
from the ground truth's once an agent chose another free shelf; if the item is not on any shelf (an earlier
mistake), it names the ground truth's shelf and the event cannot be handled. Score = events handled by a
valid action / actionable events (all of them here).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .base import Notice, Outcome
from .recovery import Recovery

SHELVES = 500


class EventKind(StrEnum):
    RECEIVE = "receive"
    ORDER = "order"
    MAINTENANCE = "maintenance"


SKILL_OF = {
    EventKind.RECEIVE: "warehouse-receiving",
    EventKind.ORDER: "warehouse-shipping",
    EventKind.MAINTENANCE: "warehouse-maintenance",
}
"""The skill whose agent handles each kind of event (in multi-agent runs)."""


@dataclass(frozen=True)
class Event:
    index: int
    kind: EventKind
    item: str
    truth_shelf: str
    """Where the ground truth holds the item when the event happens (for maintenance: the shelf to clear)."""

    @property
    def skill(self) -> str:
        return SKILL_OF[self.kind]


def shelf_name(number: int) -> str:
    return f"shelf_{number}"


def generate_events(horizon: int, seed: int, shelves: int = SHELVES) -> list[Event]:
    """`horizon` events from the ground-truth simulation; the same arguments give the same events."""
    rng = random.Random(seed)
    truth: dict[str, str] = {}
    empty = [shelf_name(n) for n in range(shelves)]
    events: list[Event] = []
    received = 0
    for index in range(horizon):
        kinds = ([EventKind.RECEIVE] if empty else []) + ([EventKind.ORDER, EventKind.MAINTENANCE] if truth else [])
        kind = rng.choice(kinds)
        if kind is EventKind.RECEIVE:
            shelf = empty.pop(rng.randrange(len(empty)))
            item, received = f"item_{received}", received + 1
            truth[shelf] = item
        else:
            shelf = rng.choice(sorted(truth, key=shelf_number))
            item = truth[shelf]
            if kind is EventKind.ORDER or not empty:
                del truth[shelf]
                empty.append(shelf)
            else:
                moved_to = empty.pop(rng.randrange(len(empty)))
                truth[moved_to] = truth.pop(shelf)
                empty.append(shelf)
        events.append(Event(index, kind, item, shelf))
    return events


class Warehouse:
    """The world the agents act on."""

    def __init__(self, shelves: int = SHELVES) -> None:
        self.shelves = shelves
        self.stock: dict[str, str] = {}
        """shelf -> item, occupied shelves only"""
        self.arrived: set[str] = set()
        """Items received and not stored yet."""

    def alert(self, event: Event) -> str:
        """The event as the agents read it (an arrival is delivered to the dock when announced)."""
        if event.kind is EventKind.RECEIVE:
            self.arrived.add(event.item)
            return f"Shipment arrived containing {event.item}."
        if event.kind is EventKind.ORDER:
            return f"Customer ordered {event.item}."
        return f"Maintenance required on {self.location(event.item) or event.truth_shelf}."

    def location(self, item: str) -> str | None:
        return next((shelf for shelf, held in self.stock.items() if held == item), None)

    def execute(self, action: str, event: Event | None) -> Outcome:
        """Validate and apply an action; an invalid one changes nothing and says why."""
        words = action.split()
        verb = words[0].capitalize() if words else ""
        arity = {"Store": 2, "Ship": 2, "Move": 3, "Wait": 0}
        if verb not in arity:
            unknown = f"Unknown action {verb or '(empty)'!r}: use Store, Ship, Move or Wait."
            return Outcome(action, "error", unknown, False)
        if len(words) - 1 != arity[verb]:
            return Outcome(action, "error", f"{verb} takes {arity[verb]} arguments, got {len(words) - 1}.", False)
        bad = next((w for w in words[2:] if not is_shelf(w, self.shelves)), None)
        if bad is not None:
            return Outcome(action, "error", f"{bad} is not a shelf (shelf_0 to shelf_{self.shelves - 1}).", False)
        if verb == "Wait":
            return Outcome(action, "ok", "Waited.", False)
        if verb == "Store":
            return self._store(action, words[1], words[2], event)
        if verb == "Ship":
            return self._ship(action, words[1], words[2], event)
        return self._move(action, words[1], words[2], words[3], event)

    def _store(self, action: str, item: str, shelf: str, event: Event | None) -> Outcome:
        if item not in self.arrived:
            return Outcome(action, "error", f"{item} is not waiting at the dock.", False)
        if shelf in self.stock:
            return Outcome(action, "error", f"{shelf} is occupied by {self.stock[shelf]}.", False)
        self.arrived.discard(item)
        self.stock[shelf] = item
        handled = event is not None and event.kind is EventKind.RECEIVE and event.item == item
        return Outcome(action, "ok", f"Stored {item} on {shelf}.", handled)

    def _ship(self, action: str, item: str, shelf: str, event: Event | None) -> Outcome:
        if self.stock.get(shelf) != item:
            held = self.stock.get(shelf)
            return Outcome(action, "error", f"{shelf} holds {held or 'nothing'}, not {item}.", False)
        del self.stock[shelf]
        handled = event is not None and event.kind is EventKind.ORDER and event.item == item
        return Outcome(action, "ok", f"Shipped {item} from {shelf}.", handled)

    def _move(self, action: str, item: str, old: str, new: str, event: Event | None) -> Outcome:
        if self.stock.get(old) != item:
            return Outcome(action, "error", f"{old} holds {self.stock.get(old) or 'nothing'}, not {item}.", False)
        if new in self.stock:
            return Outcome(action, "error", f"{new} is occupied by {self.stock[new]}.", False)
        self.stock[new] = self.stock.pop(old)
        handled = event is not None and event.kind is EventKind.MAINTENANCE and event.item == item
        return Outcome(action, "ok", f"Moved {item} from {old} to {new}.", handled)


def is_shelf(word: str, shelves: int) -> bool:
    """`shelf_N` with N from 0 to `shelves` - 1, written without leading zeros."""
    prefix, _, number = word.partition("_")
    return prefix == "shelf" and number.isdigit() and int(number) < shelves and str(int(number)) == number


def shelf_number(shelf: str) -> int:
    return int(shelf.rpartition("_")[2])


TELEMETRY = (
    "Battery: {pct}%, Temperature: {temp}C, CPU Load: {pct2}%, Speed: {speed} m/s, Nav Confidence: {conf}%",
    "[Sensor] Humidity: {pct}%, Temp: {room}C, Light: {lux} lux, CO2: {co2} ppm",
    "[Camera OCR] {sighting}",
)
SIGHTINGS = ("Forklift parked.", "Worker entered Zone A.", "Safety Vest Detected.", "Pallet jack idle in aisle 4.")


def telemetry(rng: random.Random, count: int) -> list[str]:
    """Irrelevant background lines (Appendix C.2): random values, never about the task or the world."""
    lines = []
    for _ in range(count):
        template = rng.choice(TELEMETRY)
        lines.append(
            template.format(
                pct=rng.randint(5, 100),
                pct2=rng.randint(5, 100),
                temp=rng.randint(30, 70),
                speed=round(rng.uniform(0.1, 2.5), 1),
                conf=round(rng.uniform(80, 100), 1),
                room=round(rng.uniform(18, 26), 1),
                lux=rng.randint(100, 600),
                co2=rng.randint(380, 900),
                sighting=rng.choice(SIGHTINGS),
            )
        )
    return lines


def _order(item: str, shelf: str) -> Event:
    """An order a recovery scenario adds (no index: not one of the generated events)."""
    return Event(-1, EventKind.ORDER, item, shelf)


class WarehouseEnvironment:
    """The warehouse's events, one observation each, against the world (the driver's Environment); with a
    `scenario` (recovery.py), the world changes once outside the agents' actions and an alert says so."""

    skills: tuple[str, ...] = tuple(SKILL_OF.values())

    def __init__(self, events: list[Event], shelves: int = SHELVES, scenario: str | None = None) -> None:
        self.world = Warehouse(shelves)
        self.events = len(events)
        self._pending = deque(events)
        self._first: deque[Notice] = deque()
        """Alerts and their follow-up, published before the next event."""
        self.handled = 0
        self._steps = 0
        self._last: tuple[Notice, Outcome] | None = None
        self.recovery = None
        if scenario is not None:
            self.recovery = Recovery(scenario, at=len(events) // 3, order=_order)

    def next_notice(self) -> Notice | None:
        if self.recovery is not None:
            extra = self.recovery.notices(self.world, self._steps, self._last)
            if extra:
                self.events += sum(notice.subject is not None for notice in extra)  # the follow-up order counts
                self._first.extend(extra)
                kept = deque(e for e in self._pending if e.item not in self.recovery.retired)
                self.events -= len(self._pending) - len(kept)
                self._pending = kept
        if self._first:
            return self._first.popleft()
        if not self._pending:
            return None
        event = self._pending.popleft()
        return Notice(event.skill, self.world.alert(event), event)

    def act(self, notice: Notice, action: str) -> Outcome:
        if notice.subject is None and action.strip().capitalize() == "Wait":
            outcome = Outcome(action, "ok", "Noted.", False)  # an alert asks for no action in the world
        else:
            outcome = self.world.execute(action, notice.subject)
        self.handled += outcome.handled
        self._steps += 1
        self._last = (notice, outcome)
        if self.recovery is not None:
            self.recovery.judge(notice, action, outcome)
        return outcome

    def telemetry(self, rng: random.Random, count: int) -> list[str]:
        return telemetry(rng, count)

    def score(self) -> tuple[int, int]:
        return self.handled, self.events

    def snapshot(self) -> dict[str, Any]:
        return {"inventory": dict(self.world.stock)}
