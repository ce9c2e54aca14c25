"""The events another agent holds, as one agent of a team keeps them: looked at again every half lease,
busy or not, since the holder's lease may run out (it died, or its model stalled)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from skillstate.clients import Observation


class HeldEvents:
    def __init__(self, lease_seconds: float) -> None:
        self._every = lease_seconds / 2
        self._events: dict[str, tuple[Mapping[str, Any], Observation]] = {}
        self._look_at = 0.0
        """When to look at them again (time.monotonic)."""

    def __bool__(self) -> bool:
        return bool(self._events)

    def hold(self, event_id: str, payload: Mapping[str, Any], observation: Observation) -> None:
        if not self._events:
            self._look_at = time.monotonic() + self._every
        self._events[event_id] = (payload, observation)

    def forget(self, event_id: str) -> None:
        self._events.pop(event_id, None)

    def __iter__(self) -> Iterator[tuple[str, Mapping[str, Any], Observation]]:
        """Every held event (a copy: the caller may forget some on the way)."""
        return iter([(event_id, payload, observation) for event_id, (payload, observation) in self._events.items()])

    @property
    def due(self) -> bool:
        return bool(self._events) and time.monotonic() >= self._look_at

    def wait(self) -> float | None:
        """Seconds until they are due (None: none held, wait for the inbox alone)."""
        return max(0.0, self._look_at - time.monotonic()) if self._events else None

    def looked(self) -> None:
        """They were all looked at: the next look is half a lease away."""
        self._look_at = time.monotonic() + self._every
