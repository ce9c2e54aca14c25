"""The world's own clock: events arrive on ticks drawn from a seed, whether or not any agent is ready.

A tick lasts `tick_ms` wall-clock milliseconds. Each tick brings a number of events drawn from a Poisson
distribution of mean `rate` (so `rate` is events per tick on average), until `horizon` events have come;
an event must be handled within `deadline` ticks of its arrival. The same seed gives the same ticks.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    """How fast the world runs."""

    tick_ms: float = 100.0
    """Wall-clock milliseconds per tick."""
    rate: float = 1.0
    """Events per tick, on average."""
    deadline: int = 20
    """Ticks an event may wait for its handling before it is late."""

    def __post_init__(self) -> None:
        if self.tick_ms <= 0 or self.rate <= 0 or self.deadline < 1:
            raise ValueError("tick_ms and rate must be positive and deadline at least 1 tick")


def arrival_ticks(horizon: int, rate: float, seed: int) -> list[int]:
    """The tick (from 1) at which each of `horizon` events arrives, in order: Poisson(rate) events a tick."""
    rng = random.Random(f"arrivals:{seed}")
    ticks: list[int] = []
    tick = 0
    while len(ticks) < horizon:
        tick += 1
        ticks.extend([tick] * _poisson(rng, rate))
    return ticks[:horizon]


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method: multiply uniforms until their product drops below e^-mean (fine for small means)."""
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


class Clock:
    """Ticks of wall-clock time since `start`."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self.started = time.monotonic()

    def now(self) -> int:
        """The current tick: 0 until the first has passed."""
        return int((time.monotonic() - self.started) * 1000 // self.pace.tick_ms)

    def seconds(self, ticks: float) -> float:
        return ticks * self.pace.tick_ms / 1000

    async def until(self, tick: int) -> None:
        """Return once `tick` has begun."""
        delay = self.started + self.seconds(tick) - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
