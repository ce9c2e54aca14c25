"""The stockroom: the warehouse for agents working at once, with data several of them write together.

Items come in units. A shipment brings 1 to 3 units of an item, which go on the item's shelf (a new item's
shelf is any free one, chosen by the agent); an order ships one unit; maintenance moves an item's units to
another shelf. An item keeps its shelf when its last unit ships, so a shipment arriving then finds it.

The world keeps its own books (`books`): units per item in stock, each item's shelf, the orders shipped. The
agents keep theirs in Σ (`POLICIES`): `stock` per item under `counter` (receiving adds, shipping
subtracts), `locations` item -> shelf under `lww`, `shipped` orders under `set`, and, written by the runtime,
an `audit` trail under `append` and shift `notes` under `text`.

With probability `contention` an event comes with a second about the same item, announced at once (envs/
timed.py): two shipments of a new item, a shipment and an order for an item in stock, or two orders for an
item with two units or more. Each pair is valid in either order, so the world can run them as they commit;
what the agents write for them meets in the merge. An action answers its own event only: a Store the units
and item its shipment says, a Move the item its maintenance is due for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .base import Outcome
from .warehouse import SHELVES, EventKind, is_shelf

STOCKROOM_SKILLS = ("stockroom-receiving", "stockroom-shipping", "stockroom-maintenance")
SKILL_OF = dict(zip(EventKind, STOCKROOM_SKILLS, strict=True))
POLICIES = {"stock": "counter", "locations": "lww", "shipped": "set", "audit": "append", "notes": "text"}
"""Each top-level key of the stockroom's Σ and the merge policy a designer gives it."""
BOOKS = ("stock", "locations", "shipped")
"""The keys whose values the world's books say (state drift compares them)."""
NEW_ITEM = 0.5
"""The chance that a shipment is of an item never seen before (while shelves are free)."""
PAIRS = ("receive+receive", "receive+order", "order+order")
KIND_WEIGHTS = {EventKind.RECEIVE: 2, EventKind.ORDER: 2, EventKind.MAINTENANCE: 1}
"""How often each kind of single event comes (a maintenance, which holds its item's other events, least)."""


@dataclass(frozen=True)
class StockEvent:
    index: int
    kind: EventKind
    item: str
    units: int
    """Units arriving (receive) or ordered (order); 0 for maintenance."""
    partner: int | None = None
    """The index of the event announced together with this one (contention), if any."""

    @property
    def skill(self) -> str:
        return SKILL_OF[self.kind]

    @property
    def order(self) -> str:
        return f"order_{self.index}"


def generate_stock_events(horizon: int, seed: int, contention: float, shelves: int = SHELVES) -> list[StockEvent]:
    """`horizon` events, each valid where the ground truth runs it, and a pair valid in either order; the same
    arguments give the same events."""
    if not 0 <= contention <= 1:
        raise ValueError(f"contention: {contention} is a probability (0 to 1)")
    rng = random.Random(f"stockroom:{seed}")
    units: dict[str, int] = {}
    events: list[StockEvent] = []

    def add(kind: EventKind, item: str, count: int, partner: int | None = None) -> None:
        events.append(StockEvent(len(events), kind, item, count, partner))
        units[item] = units.get(item, 0) + (count if kind is EventKind.RECEIVE else -count)

    while len(events) < horizon:
        stocked = sorted((i for i, n in units.items() if n > 0), key=_number)
        new_item = f"item_{len(units)}" if len(units) < shelves else None
        if horizon - len(events) >= 2 and rng.random() < contention:
            candidates = {pair: items for pair in PAIRS if (items := _pair_items(pair, stocked, units, new_item))}
            if candidates:
                pair = rng.choice(list(candidates))
                item = rng.choice(candidates[pair])
                first, second = (EventKind(kind) for kind in pair.split("+"))
                index = len(events)
                add(first, item, _units(rng, first), index + 1)
                add(second, item, _units(rng, second), index)
                continue
        kinds = [EventKind.RECEIVE] + ([EventKind.ORDER, EventKind.MAINTENANCE] if stocked else [])
        kind = rng.choices(kinds, weights=[KIND_WEIGHTS[k] for k in kinds])[0]
        if kind is EventKind.RECEIVE:
            if new_item is None or (units and rng.random() >= NEW_ITEM):
                item = rng.choice(sorted(units, key=_number))
            else:
                item = new_item
        else:
            item = rng.choice(stocked)
        add(kind, item, _units(rng, kind))
    return events


def _pair_items(pair: str, stocked: list[str], units: dict[str, int], new_item: str | None) -> list[str]:
    """The items a pair may be about: a new item for two shipments, an item with two units or more for two
    orders, any item in stock for a shipment and an order."""
    if pair == "receive+receive":
        return [new_item] if new_item is not None else []
    if pair == "order+order":
        return [i for i in stocked if units[i] >= 2]
    return stocked


def _units(rng: random.Random, kind: EventKind) -> int:
    return {EventKind.RECEIVE: rng.randint(1, 3), EventKind.ORDER: 1, EventKind.MAINTENANCE: 0}[kind]


def _number(name: str) -> int:
    return int(name.rpartition("_")[2])


class Stockroom:
    """The world the agents act on, with its books."""

    def __init__(self, shelves: int = SHELVES) -> None:
        self.shelves = shelves
        self.units: dict[str, int] = {}
        self.shelf_of: dict[str, str] = {}
        """item -> its shelf, kept when its last unit ships"""
        self.holder: dict[str, str] = {}
        """shelf -> the item it is kept for"""
        self.shipped: set[str] = set()

    def alert(self, event: StockEvent) -> str:
        """The event as the agents read it."""
        if event.kind is EventKind.RECEIVE:
            return f"Shipment arrived containing {event.units} units of {event.item}."
        if event.kind is EventKind.ORDER:
            return f"Customer {event.order} asks for {event.units} unit of {event.item}."
        return f"Maintenance due on {self.shelf_of[event.item]}."

    def has_shelf(self, item: str) -> bool:
        return item in self.shelf_of

    def units_on_shelf(self, item: str) -> int:
        return self.units.get(item, 0) if item in self.shelf_of else 0

    def execute(self, action: str, event: StockEvent | None) -> Outcome:
        """Validate and apply an action; an invalid one changes nothing and says why."""
        words = action.split()
        verb = words[0].capitalize() if words else ""
        arity = {"Store": 3, "Ship": 3, "Move": 3, "Wait": 0}
        if verb not in arity:
            return Outcome(
                action, "error", f"Unknown action {verb or '(empty)'!r}: use Store, Ship, Move or Wait.", False
            )
        if len(words) - 1 != arity[verb]:
            return Outcome(action, "error", f"{verb} takes {arity[verb]} arguments, got {len(words) - 1}.", False)
        if verb == "Wait":
            return Outcome(action, "ok", "Waited.", False)
        shelves = words[2:] if verb == "Move" else words[3:]
        bad = next((w for w in shelves if not is_shelf(w, self.shelves)), None)
        if bad is not None:
            return Outcome(action, "error", f"{bad} is not a shelf (shelf_0 to shelf_{self.shelves - 1}).", False)
        if verb == "Store":
            return self._store(action, words[1], words[2], words[3], event)
        if verb == "Ship":
            return self._ship(action, words[1], words[2], words[3], event)
        return self._move(action, words[1], words[2], words[3], event)

    def _store(self, action: str, item: str, count: str, shelf: str, event: StockEvent | None) -> Outcome:
        if not count.isdigit() or int(count) < 1:
            return Outcome(action, "error", f"{count} is not a number of units.", False)
        units = int(count)
        if event is None or event.kind is not EventKind.RECEIVE:
            return Outcome(action, "error", "No shipment waits to be stored for this event.", False)
        if (event.item, event.units) != (item, units):
            return Outcome(
                action, "error", f"The shipment is {event.units} units of {event.item}, not {units} of {item}.", False
            )
        kept = self.shelf_of.get(item)
        if kept is not None and kept != shelf:
            return Outcome(action, "error", f"{item} is kept on {kept}.", False)
        if kept is None and shelf in self.holder:
            return Outcome(action, "error", f"{shelf} is kept for {self.holder[shelf]}.", False)
        self.units[item] = self.units.get(item, 0) + units
        self.shelf_of[item], self.holder[shelf] = shelf, item
        return Outcome(action, "ok", f"Stored {units} units of {item} on {shelf}.", True)

    def _ship(self, action: str, order: str, item: str, shelf: str, event: StockEvent | None) -> Outcome:
        if event is None or event.kind is not EventKind.ORDER or event.order != order:
            return Outcome(action, "error", f"{order} is not an open order.", False)
        if event.item != item:
            return Outcome(action, "error", f"{order} asks for {event.item}, not {item}.", False)
        if self.holder.get(shelf) != item or self.units.get(item, 0) < event.units:
            held = self.holder.get(shelf)
            what = f"no units of {item}" if held in (None, item) else f"{held}, not {item}"
            return Outcome(action, "error", f"{shelf} holds {what}.", False)
        self.units[item] -= event.units
        self.shipped.add(order)
        return Outcome(action, "ok", f"Shipped {order}: {event.units} unit of {item} from {shelf}.", True)

    def _move(self, action: str, item: str, old: str, new: str, event: StockEvent | None) -> Outcome:
        if event is None or event.kind is not EventKind.MAINTENANCE:
            return Outcome(action, "error", "No maintenance is due for this event.", False)
        if event.item != item:
            return Outcome(action, "error", f"The maintenance is due on {event.item}'s shelf, not {item}'s.", False)
        if self.holder.get(old) != item:
            return Outcome(action, "error", f"{old} is not {item}'s shelf.", False)
        if new in self.holder:
            return Outcome(action, "error", f"{new} is kept for {self.holder[new]}.", False)
        del self.holder[old]
        self.holder[new], self.shelf_of[item] = item, new
        return Outcome(action, "ok", f"Moved {item} from {old} to {new}.", True)

    def books(self) -> dict[str, Any]:
        """What the world holds, in the shape of Σ's BOOKS: units in stock, each item's shelf, orders shipped."""
        return {
            "stock": {item: n for item, n in self.units.items() if n > 0},
            "locations": dict(self.shelf_of),
            "shipped": sorted(self.shipped),
        }


def believed(state: dict[str, Any]) -> dict[str, Any]:
    """What Σ says of the world's books, in their shape: items out of stock left out (Σ may hold 0), the
    shipped orders sorted."""
    stock = state.get("stock") or {}
    return {
        "stock": {item: n for item, n in stock.items() if n != 0},
        "locations": dict(state.get("locations") or {}),
        "shipped": sorted(state.get("shipped") or []),
    }


def stockroom_schema(policies: dict[str, str] | None = None) -> dict[str, Any]:
    """Σ's schema, each key under its policy (`policies` overrides some, for tests that break one)."""
    chosen = {**POLICIES, **(policies or {})}
    shelf = {"type": "string", "pattern": "^shelf_[0-9]+$"}
    shapes: dict[str, dict[str, Any]] = {
        "stock": {"type": "object", "propertyNames": {"pattern": "^item_[0-9]+$"},
                  "additionalProperties": {"type": "integer", "minimum": 0}},
        "locations": {"type": "object", "propertyNames": {"pattern": "^item_[0-9]+$"}, "additionalProperties": shelf},
        "shipped": {"type": "array", "items": {"type": "string", "pattern": "^order_[0-9]+$"}},
        "audit": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "string"},
    }  # fmt: skip
    for key, shape in shapes.items():
        target = shape["additionalProperties"] if key in ("stock", "locations") else shape
        target["x-merge"] = chosen[key]
    return {"type": "object", "properties": shapes, "required": list(POLICIES), "additionalProperties": False}


INITIAL: dict[str, Any] = {"stock": {}, "locations": {}, "shipped": [], "audit": [], "notes": ""}
