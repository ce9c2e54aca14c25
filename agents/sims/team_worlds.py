"""The worlds agents run at once in (concurrent.py): each with its skills, the policies of its Σ, its schema,
its initial state, and how to make it from a run's configuration."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..envs import repo, stockroom, timed_repo
from ..envs.clock import Pace, arrival_ticks
from ..envs.timed import TimedStockroom, TimedWorld


@dataclass(frozen=True)
class TeamWorld:
    skills: tuple[str, ...]
    policies: Mapping[str, str]
    """Each top-level key of Σ and the merge policy its design gives it."""
    schema: Callable[[dict[str, str]], dict[str, Any]]
    """Σ's schema, with some keys' policies replaced (a broken design, for tests and comparison)."""
    initial: Mapping[str, Any]
    make: Callable[[int, int, float, Pace], TimedWorld]
    """(horizon, seed, contention, pace) -> the world."""


def _stockroom(horizon: int, seed: int, contention: float, pace: Pace) -> TimedWorld:
    events = stockroom.generate_stock_events(horizon, seed, contention)
    return TimedStockroom(events, arrival_ticks(horizon, pace.rate, seed), pace.deadline)


def _repo(horizon: int, seed: int, contention: float, pace: Pace) -> TimedWorld:
    return timed_repo.TimedRepo(horizon, arrival_ticks(horizon, pace.rate, seed), pace.deadline, seed)


TEAM_WORLDS = {
    "warehouse": TeamWorld(stockroom.STOCKROOM_SKILLS, stockroom.POLICIES, stockroom.stockroom_schema,
                           stockroom.INITIAL, _stockroom),
    "repo": TeamWorld(repo.SKILLS, timed_repo.POLICIES, timed_repo.repo_schema, timed_repo.INITIAL, _repo),
}  # fmt: skip
"""`sim warehouse --agents-per-skill N` runs the stockroom; `sim repo ...` the repository on its clock."""
