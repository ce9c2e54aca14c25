"""The warehouse's state-recovery scenarios, which the SKILL.state paper names (Table 3) without defining them.

Each changes the world once, outside the agents' actions, a third of the way through the run, then says so
in an unstructured alert to the skill that keeps the inventory (`warehouse-maintenance`; with one agent, to
it), and then orders the item the change concerns, so that acting on the old belief shows:

- `secret-audit`: two items are found on each other's shelves (`Alert: an audit found shelf_X holding item_B
  and shelf_Y holding item_A.`), then item_A is ordered;
- `secret-barcode`: an item is relabelled (`Alert: item_A on shelf_X was relabelled item_A2.`), then item_A2
  is ordered;
- `secret-move`: someone else moves an item (`Alert: item_A was moved from shelf_X to shelf_Y by the night
  shift.`), then item_A is ordered;
- `canceled-order`: an order the agent has just shipped is canceled and the item wanted back (`Alert: the
  order for item_A was canceled; the customer wants item_A kept in stock.`).

`canceled-order` is unrecoverable, as in the paper: the item left with the shipment.

**Hallucination lag** (the paper's Tables 3 and 10) is the number of steps after the change during which an
agent acts on its stale belief: an action on the changed item or shelves that the change made fail (shipping
the item from the shelf it left, storing onto a shelf now taken), or, for the relabelled item, waiting for
lack of a record of its new name. A perfect agent scores 0. `recovery_steps` counts the steps from the alert
to the follow-up order's handling (a perfect agent: 2, the alert and the order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .base import Notice, Outcome

SCENARIOS = ("secret-audit", "secret-barcode", "secret-move", "canceled-order")
UNRECOVERABLE = frozenset({"canceled-order"})
ALERTED_SKILL = "warehouse-maintenance"
RELABEL_OFFSET = 1000
"""A relabelled item_N becomes item_<N + RELABEL_OFFSET>."""


class World(Protocol):
    """What a scenario changes: the warehouse's shelves (warehouse.py), and how it announces an event."""

    shelves: int
    stock: dict[str, str]

    def alert(self, event: Any) -> str: ...


def _number(name: str) -> int:
    return int(name.rpartition("_")[2])


@dataclass
class Recovery:
    """One scenario through one run: when the world changed, the stale actions since, and the follow-up."""

    scenario: str
    at: int
    """Events handled before the change."""
    alert_step: int | None = None
    stale_steps: int = 0
    recovery_steps: int | None = None
    stale: Callable[[str, Notice], bool] = field(default=lambda action, notice: False, repr=False)
    """Whether an action (answering a notice) acts on the belief the change made stale."""
    order: Callable[[str, str], Any] = field(default=lambda item, shelf: None, repr=False)
    """The world's order event for an item on a shelf: the follow-up a scenario publishes."""
    follow_up: Any = None
    retired: set[str] = field(default_factory=set)
    """Items the follow-up order takes out of the world: the generated events still to come about them can no
    longer happen, and are dropped."""

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario: unknown {self.scenario!r} (one of {', '.join(SCENARIOS)})")

    def notices(self, world: World, handled: int, last: tuple[Notice, Outcome] | None) -> list[Notice]:
        """The alert and follow-up to publish before the next event, once it is time (else none)."""
        if self.alert_step is not None or handled < self.at:
            return []
        if self.scenario == "canceled-order":
            return self._cancel(last)
        stocked = sorted(world.stock.items(), key=lambda pair: _number(pair[1]))
        if len(stocked) < 2:
            return []
        (x, a), (y, b) = stocked[0], stocked[1]
        if self.scenario == "secret-move":
            free = _free_shelf(world, _number(x) + 137)
            world.stock[free] = world.stock.pop(x)
            text = f"Alert: {a} was moved from {x} to {free} by the night shift."
            self.follow_up, self.retired = self.order(a, free), {a}
            self.stale = lambda action, notice: _names(action, a, x) or _stores_on(action, free)
        elif self.scenario == "secret-audit":
            world.stock[x], world.stock[y] = b, a
            text = f"Alert: an audit found {x} holding {b} and {y} holding {a}."
            self.follow_up, self.retired = self.order(a, y), {a}
            self.stale = lambda action, notice: _names(action, a, x) or _names(action, b, y)
        else:
            relabelled = f"item_{_number(a) + RELABEL_OFFSET}"
            world.stock[x] = relabelled
            text = f"Alert: {a} on {x} was relabelled {relabelled}."
            self.follow_up, self.retired = self.order(relabelled, x), {a}
            follow_up = self.follow_up
            self.stale = lambda action, notice: (
                a in action.split() or (notice.subject is follow_up and action == "Wait")
            )
        self.alert_step = 0
        return [Notice(ALERTED_SKILL, text), Notice("warehouse-shipping", world.alert(self.follow_up), self.follow_up)]

    def _cancel(self, last: tuple[Notice, Outcome] | None) -> list[Notice]:
        if last is None:
            return []
        notice, outcome = last
        event = notice.subject
        if not (getattr(event, "kind", None) == "order" and outcome.handled):
            return []
        self.alert_step = 0
        self.follow_up = None
        text = f"Alert: the order for {event.item} was canceled; the customer wants {event.item} kept in stock."
        return [Notice(ALERTED_SKILL, text)]

    def judge(self, notice: Notice, action: str, outcome: Outcome) -> None:
        """One step after the change: count it stale if it acted on the old belief."""
        if self.alert_step is None or self.recovery_steps is not None:
            return
        self.alert_step += 1
        if notice.subject is not None and self.stale(action.strip(), notice) and not outcome.handled:
            self.stale_steps += 1
        if self.follow_up is not None and notice.subject is self.follow_up and outcome.handled:
            self.recovery_steps = self.alert_step

    def result(self) -> dict[str, Any]:
        recoverable = self.scenario not in UNRECOVERABLE
        recovered = recoverable and self.recovery_steps is not None
        return {
            "scenario": self.scenario,
            "recoverable": recoverable,
            "recovered": recovered,
            "hallucination_lag": self.stale_steps if recovered else None,
            "recovery_steps": self.recovery_steps if recovered else None,
        }


def _names(action: str, item: str, shelf: str) -> bool:
    """Whether an action treats `item` as being on `shelf` (ship or move it from there)."""
    words = action.split()
    return len(words) >= 3 and words[0] in ("Ship", "Move") and words[1] == item and words[2] == shelf


def _stores_on(action: str, shelf: str) -> bool:
    words = action.split()
    return len(words) == 3 and words[0] == "Store" and words[2] == shelf


def _free_shelf(world: World, start: int) -> str:
    for step in range(world.shelves):
        shelf = f"shelf_{(start + step) % world.shelves}"
        if shelf not in world.stock:
            return shelf
    raise RuntimeError("the warehouse is full")
