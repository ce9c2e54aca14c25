"""The scripted test policy in the stockroom (envs/stockroom.py): what it answers from a SKILL.state prompt
(Σ's `stock`, `locations` and `shipped`) or from a group chat's transcript (the results of earlier actions).

It chooses a free shelf at random (seeded by its prompt), as nothing in the skills says which: agents
storing at once may choose the same one, and the world refuses the later. After a failed action it takes
back what that action recorded (the observation shows what its patches wrote), then answers the event again,
as the skills' troubleshooting says.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Collection
from typing import Any

from ..envs.warehouse import SHELVES
from ..protocol.prompts import GIVE_UP, RECORDED_HEADER
from .memory import recalled

STOCK_EVENT = re.compile(r"units of item_\d+\.|Customer order_\d+ asks|Maintenance due on shelf_")
"""An observation of the stockroom (the sequential warehouse words its events otherwise)."""
_RECEIVE = re.compile(r"Shipment arrived containing (\d+) units of (item_\d+)")
_ORDER = re.compile(r"Customer (order_\d+) asks for (\d+) unit of (item_\d+)")
_MAINTENANCE = re.compile(r"Maintenance due on (shelf_\d+)")
_LAST = re.compile(r"Last action: (.*)\nStatus: (\w+)\nResult: (.*)")
_KEPT_ON = re.compile(r"(item_\d+) is kept on (shelf_\d+)")
_RECORDED = re.compile(re.escape(RECORDED_HEADER) + r" (.*)")
_HISTORY = re.compile(
    r"Action: (?P<action>(?:Store|Move) [^\n]+)"
    r"|Result: (?:Stored \d+ units of (?P<stored>item_\d+) on (?P<on>shelf_\d+)"
    r"|Moved (?P<moved>item_\d+) from shelf_\d+ to (?P<to>shelf_\d+))"
    r"|Last action: (?P<failed>(?:Store|Move) [^\n]+)\nStatus: error"
)


class Books:
    """What the prompt says of the stockroom: stock, locations and shipped orders, and what this step changes."""

    def __init__(self, stock: dict[str, int], locations: dict[str, str], shipped: list[str]) -> None:
        self.stock, self.locations, self.shipped = dict(stock), dict(locations), list(shipped)
        self._read = (dict(stock), dict(locations), list(shipped))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Books:
        stock = {k: v for k, v in (state.get("stock") or {}).items() if isinstance(v, int)}
        locations = {k: v for k, v in (state.get("locations") or {}).items() if isinstance(v, str)}
        return cls(stock, locations, [o for o in state.get("shipped") or [] if isinstance(o, str)])

    @classmethod
    def from_transcript(cls, head: str, recall: float = 1.0) -> Books:
        """Locations replayed from a conversation: an action's shelf until its result confirms or refutes it,
        each recalled with probability `recall` (memory.py)."""
        confirmed: dict[str, str] = {}
        locations: dict[str, str] = {}
        for match in _HISTORY.finditer(head):
            if match["action"]:
                verb, *words = match["action"].split()
                if len(words) == 3 and (verb == "Move" or words[0] not in confirmed):
                    locations[words[0]] = words[2]  # Store <item> <units> <shelf>, Move <item> <old> <new>
            elif match["stored"] or match["moved"]:
                item, shelf = (match["stored"], match["on"]) if match["stored"] else (match["moved"], match["to"])
                confirmed[item] = locations[item] = shelf
            else:
                item = match["failed"].split()[1]
                if item in confirmed:
                    locations[item] = confirmed[item]
                else:
                    locations.pop(item, None)
        return cls({}, recalled(locations, head, recall), [])

    def patch(self) -> dict[str, Any]:
        """The state patch of what this step changed (only the keys it changed)."""
        stock, locations, shipped = self._read
        patch: dict[str, Any] = {}
        if changed := {k: v for k, v in self.stock.items() if stock.get(k) != v}:
            patch["stock"] = changed
        moved: dict[str, str | None] = {k: v for k, v in self.locations.items() if locations.get(k) != v}
        moved.update({k: None for k in locations if k not in self.locations})
        if moved:
            patch["locations"] = moved
        if sorted(self.shipped) != sorted(shipped):
            patch["shipped"] = sorted(self.shipped)
        return patch

    def free_shelf(self, rng: random.Random, also_taken: Collection[str] = ()) -> str:
        """A free shelf at random: none of `locations` is kept on it, nor is it one of `also_taken`."""
        taken = {*self.locations.values(), *also_taken}
        return rng.choice([f"shelf_{n}" for n in range(SHELVES) if f"shelf_{n}" not in taken])


def stockroom_answer(
    head: str, observation: str, state: dict[str, Any] | None, recall: float = 1.0, fumbles: bool = False
) -> tuple[str, dict[str, Any], str]:
    """(reasoning, state patch, action) for a stockroom prompt: the part before its latest observation, the
    observation, and the state block it shows (None: a transcript runtime, which patches nothing and recalls
    each shelf with probability `recall`). With `fumbles` (a faulty agent) it misreads the event (`_fumbled`)."""
    books = Books.from_state(state) if state is not None else Books.from_transcript(head, recall)
    rng = random.Random(hashlib.sha256((head + observation).encode()).digest())
    reasoning: list[str] = []
    refused: set[str] = set()
    last = _LAST.search(observation)
    if last and last.group(2) == "error":
        reasoning.append(f"My last action `{last.group(1)}` failed: {last.group(3)} I take back what it recorded.")
        recorded = _RECORDED.search(observation)
        refused = _take_back(books, last.group(1), last.group(3), json.loads(recorded.group(1)) if recorded else {})
    if GIVE_UP in observation:
        reasoning.append("I have no attempts left at this event, so I only take back what I recorded.")
        return " ".join(reasoning), books.patch() if state is not None else {}, "Wait"
    action = _decide(books, observation, rng, refused, reasoning)
    if fumbles:
        action = _fumbled(books, action)
    reasoning.append(f"The state update records the effect of `{action}`.")
    return " ".join(reasoning), books.patch() if state is not None else {}, action


def _take_back(books: Books, action: str, result: str, recorded: dict[str, Any]) -> set[str]:
    """Undo a failed action's own record (`recorded`: what the patches on its event wrote); the shelves the
    result says are taken."""
    words = action.split()
    if words[:1] == ["Store"] and len(words) == 4 and words[2].isdigit():
        item, units, shelf = words[1], int(words[2]), words[3]
        books.stock[item] = books.stock.get(item, 0) - units
        if kept := _KEPT_ON.search(result):
            books.locations[item] = kept.group(2)
        elif (recorded.get("locations") or {}).get(item) == shelf and books.locations.get(item) == shelf:
            del books.locations[item]  # a new item's shelf, which this action chose
            return {shelf}
    elif words[:1] == ["Ship"] and len(words) == 4:
        order, item = words[1], words[2]
        books.stock[item] = books.stock.get(item, 0) + 1
        books.shipped = [o for o in books.shipped if o != order]
    elif words[:1] == ["Move"] and len(words) == 4:
        item, old, new = words[1:]
        if books.locations.get(item) == new:
            books.locations[item] = old
        return {new}
    return set()


def _fumbled(books: Books, action: str) -> str:
    """The action misread, as `skillstate/fumbles` answers, with its record to match: a Store of one unit
    more, a Ship from the next shelf (the world refuses either)."""
    verb, *words = action.split()
    if verb == "Store":
        item, units, shelf = words
        books.stock[item] += 1
        return f"Store {item} {int(units) + 1} {shelf}"
    if verb == "Ship":
        order, item, shelf = words
        return f"Ship {order} {item} shelf_{(int(shelf.rpartition('_')[2]) + 1) % SHELVES}"
    return action


def _decide(books: Books, observation: str, rng: random.Random, refused: set[str], reasoning: list[str]) -> str:
    if "No more events" in observation:
        reasoning.append("There are no more events, so the work is done.")
        return "Finish"
    if arrived := _RECEIVE.search(observation):
        units, item = int(arrived.group(1)), arrived.group(2)
        shelf = books.locations.get(item) or books.free_shelf(rng, refused)
        reasoning.append(f"{units} units of {item} arrived; its shelf is {shelf}.")
        books.stock[item] = books.stock.get(item, 0) + units
        books.locations[item] = shelf
        return f"Store {item} {units} {shelf}"
    if ordered := _ORDER.search(observation):
        order, _, item = ordered.groups()
        kept = books.locations.get(item)
        if kept is None:
            reasoning.append(f"{order} asks for {item}, but I have no record of its shelf, so I wait.")
            return "Wait"
        reasoning.append(f"{order} asks for {item}, kept on {kept}: I ship one unit.")
        books.stock[item] = books.stock.get(item, 0) - 1
        books.shipped = sorted({*books.shipped, order})
        return f"Ship {order} {item} {kept}"
    if due := _MAINTENANCE.search(observation):
        shelf = due.group(1)
        item = next((i for i, s in sorted(books.locations.items()) if s == shelf), None)
        if item is None:
            reasoning.append(f"{shelf} needs maintenance, but I have no record of its item, so I wait.")
            return "Wait"
        target = books.free_shelf(rng, refused | {shelf})
        reasoning.append(f"{shelf} needs maintenance and keeps {item}; I move it to {target}, a free shelf.")
        books.locations[item] = target
        return f"Move {item} {shelf} {target}"
    reasoning.append("Nothing in the observation asks for an action, so I wait.")
    return "Wait"
