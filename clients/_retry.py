"""How the SDK retries: the policy, and the run of failed reopenings of one stream it bounds."""

from __future__ import annotations

import asyncio
import random as _random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of UNAVAILABLE with jittered exponential backoff, for the calls a retry cannot duplicate:
    reads, and SubmitPatch (its idempotency key makes a retry return the original result). CreateExecution
    and PublishObservation are not retried: after a lost reply a retry could create or publish twice.

    The jitter is "equal jitter" (AWS Architecture Blog, "Exponential Backoff and Jitter"): after attempt n
    a client waits half of min(max_backoff, initial_backoff * 2^n) plus a uniform random part of the other
    half. Clients cut by one restart so retry spread out instead of in lockstep, and, unlike "full jitter"
    (anything from 0), the floor keeps the time a number of attempts spans predictable: with the defaults
    the backoffs add up to 3.55-7.1 s whatever the draws, enough to ride out a server restart.
    """

    attempts: int = 8
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    deadline: float | None = 10.0
    """Seconds from a retried call's first attempt after which it gives up: no attempt starts after it, and
    each attempt's timeout is the least of the call's timeout and what is left of it (an attempt cut by it
    fails DEADLINE_EXCEEDED). None: the attempts alone bound the call. For a stream, it bounds each run of
    failed reopenings, counted from the failure that started it."""
    random: Callable[[], float] | None = None
    """Draws the jitter, uniform in [0, 1) (None: `random.random`); `random.Random(seed).random` makes the
    backoffs reproducible."""

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (0: the first) before the next."""
        ceiling = min(self.max_backoff, self.initial_backoff * 2 ** min(attempt, 64))
        return float(ceiling / 2 + (self.random or _random.random)() * ceiling / 2)


class Reopenings:
    """One stream's run of failed (re)openings, held to a RetryPolicy: at most its attempts, and none that
    would start past its deadline, counted from the run's first failure. A connection that worked starts a
    new run (`reset`)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._failures = 0
        self._give_up_at: float | None = None

    def reset(self) -> None:
        self._failures, self._give_up_at = 0, None

    def failed(self, *, resumable: bool) -> float | None:
        """Count one more failure: the seconds to wait before reopening, or None to give up (the failure is
        not resumable, the attempts are used up, or the pause would end past the deadline)."""
        policy, now = self._policy, asyncio.get_running_loop().time()
        self._failures += 1
        if self._give_up_at is None and policy.deadline is not None:
            self._give_up_at = now + policy.deadline
        pause = policy.backoff(self._failures - 1)
        late = self._give_up_at is not None and now + pause >= self._give_up_at
        if not resumable or self._failures >= policy.attempts or late:
            return None
        return pause
