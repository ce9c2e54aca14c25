"""The software repository on its own clock (a TimedWorld, timed.py), for agents working at once.

Feature requests arrive at their ticks; what an action sets off comes as further events: a push with no pull
request goes back to the developers at the next tick, a pull request's CI reports `CI_TICKS` ticks later (to
the CI agents when it failed, to the maintainers when it passed), a fix makes CI report again. The events
are the repository's own webhooks (repo.py), so the run has more events than requests: `events` counts
those announced, scheduled or still to arrive. Score: events handled, and in the books, features merged cleanly.

The world's books (`books`) say what Σ should: each feature's file, branch, latest pull request and its CI
(`features`), and how many features were merged (`merged`, which the maintainers keep under `counter`:
two of them merging at once both count).
"""

from __future__ import annotations

import collections
import heapq
from typing import Any

from .base import Notice, Outcome
from .repo import SKILLS, RepoEnvironment
from .timed import Arrival

CI_TICKS = 3
"""Ticks a CI run takes before it reports."""
POLICIES = {"features": "reject", "merged": "counter", "audit": "append", "notes": "text"}
"""Each top-level key of the repository's Σ and its merge policy (inside `features`: `pr` under `max`, the
latest pull request's number, and `ci` under `lww`, the latest run's result)."""
BOOKS = ("features", "merged")


class TimedRepo:
    """`horizon` feature requests at their ticks, and the webhooks they set off (a TimedWorld)."""

    skills: tuple[str, ...] = SKILLS

    def __init__(self, horizon: int, ticks: list[int], deadline: int, seed: int) -> None:
        self.repo = RepoEnvironment(horizon, seed)
        self._announced = 0
        self.last_tick = max(ticks, default=0)
        self._requests = collections.deque(ticks)
        self._scheduled: list[tuple[int, int, Notice]] = []
        """(tick, order, notice): webhooks set off by actions, due at their tick"""
        self._notices: dict[str, Notice] = {}
        self._handled: set[str] = set()
        self._deadline = deadline
        self._tick = 0

    def due(self, tick: int) -> list[Arrival]:
        self._tick = tick
        announced = []
        while self._requests and self._requests[0] <= tick:
            arrived = self._requests.popleft()
            announced.append(self._announce(self.repo.request(), arrived))
        while self._scheduled and self._scheduled[0][0] <= tick:
            arrived, _, notice = heapq.heappop(self._scheduled)
            announced.append(self._announce(notice, arrived))
        return announced

    @property
    def events(self) -> int:
        return self._announced + self.unannounced()

    def _announce(self, notice: Notice, arrived: int) -> Arrival:
        event_id = f"e{self._announced}"
        self._announced += 1
        self._notices[event_id] = notice
        return Arrival(event_id, notice.skill, notice.text, arrived, arrived + self._deadline)

    def act(self, event_id: str, command: str) -> Outcome:
        notice = self._notices[event_id]
        outcome = self.repo.act(notice, command)
        if event_id in self._handled:
            outcome = Outcome(outcome.action, outcome.status, outcome.result, False)
        elif outcome.handled:
            self._handled.add(event_id)
        while self.repo.queue:  # what the action set off
            follow_up = self.repo.queue.popleft()
            delay = CI_TICKS if follow_up.text.startswith("CI Pipeline") else 1
            when = self._tick + delay
            heapq.heappush(self._scheduled, (when, len(self._notices) + len(self._scheduled), follow_up))
            self.last_tick = max(self.last_tick, when)
        return outcome

    def unannounced(self) -> int:
        return len(self._requests) + len(self._scheduled)

    def books(self) -> dict[str, Any]:
        merged = sum(f.merged for f in self.repo.features.values())
        return {**self.repo.snapshot(), "merged": merged}

    def believed(self, state: dict[str, Any]) -> dict[str, Any]:
        return {key: state.get(key) for key in BOOKS}


def repo_schema(policies: dict[str, str] | None = None) -> dict[str, Any]:
    """The repository team's Σ: `features` (pr under max, ci under lww), `merged` under counter, and the
    journal; `policies` replaces some top-level keys' policies, for tests that break one."""
    chosen = {**POLICIES, **(policies or {})}
    entry = {
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "branch": {"type": "string"},
            "pr": {"type": "integer", "x-merge": "max"},
            "ci": {"enum": ["running", "passed", "failed"], "x-merge": "lww"},
        },
    }
    properties: dict[str, Any] = {
        "features": {"type": "object", "additionalProperties": entry, "x-merge": chosen["features"]},
        "merged": {"type": "integer", "minimum": 0, "x-merge": chosen["merged"]},
        "audit": {"type": "array", "items": {"type": "string"}, "x-merge": chosen["audit"]},
        "notes": {"type": "string", "x-merge": chosen["notes"]},
    }
    return {"type": "object", "properties": properties, "required": list(POLICIES), "additionalProperties": False}


INITIAL: dict[str, Any] = {"features": {}, "merged": 0, "audit": [], "notes": ""}
