"""What a team agent keeps of its actions on each event until the world reports on them (agent.py).

For each event it took: the attempts since it took it, what the patches sent with its actions wrote (composed,
so that a failure shows the whole record to take back, a retry's take-back-and-redo included), and whether an
outcome is still to come (once the world is done, the agent waits for those before it stops).
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Mapping
from typing import Any


class Worked(enum.Enum):
    """How a step on an event ended."""

    ACTED = "acted"
    TAKEN_OVER = "taken_over"
    """Another agent took the event over while the model was asked: nothing was submitted."""
    GAVE_UP = "gave_up"
    """Every reply was refused: nothing was submitted."""
    FINISHED = "finished"
    """The model said Finish: the claim was released."""


class EventActions:
    def __init__(self) -> None:
        self._tries: collections.Counter[str] = collections.Counter()
        self._recorded: dict[str, dict[str, Any]] = {}
        self._awaiting: set[str] = set()

    def taken(self, event_id: str) -> None:
        """The agent took the event up (again): its attempts count from now."""
        self._tries.pop(event_id, None)

    def acted(self, event_id: str, written: Mapping[str, Any]) -> None:
        """An action on the event committed with the data patch `written`."""
        self._recorded[event_id] = composed(self._recorded.get(event_id, {}), written)
        self._awaiting.add(event_id)

    def failed(self, event_id: str) -> tuple[int, dict[str, Any]]:
        """The world refused the event's latest action: the attempts failed since the agent took it up, and
        what the event's patches wrote."""
        self._awaiting.discard(event_id)
        self._tries[event_id] += 1
        return self._tries[event_id], self._recorded.get(event_id, {})

    def settled(self, event_id: str) -> None:
        """The event is handled, or its record was taken back: nothing of it is left to undo."""
        self._awaiting.discard(event_id)
        self._recorded.pop(event_id, None)

    @property
    def awaiting(self) -> bool:
        """Some action's outcome is still to come."""
        return bool(self._awaiting)


def composed(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """What two merge patches write, applied one after the other (a `null`, a deletion, is kept)."""
    result = dict(first)
    for key, value in then.items():
        earlier = result.get(key)
        both_maps = isinstance(value, Mapping) and isinstance(earlier, Mapping)
        result[key] = composed(earlier, value) if both_maps else value  # type: ignore[arg-type]
    return result


def hand_back_action(event_id: str) -> dict[str, Any]:
    """The action that gives an event back to the world, to be announced again (envs/timed_driver.py)."""
    return {"event": event_id, "hand_back": True}
