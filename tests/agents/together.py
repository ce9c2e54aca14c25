"""Agents whose steps overlap on purpose: their first reads of Σ meet at a barrier, so they all answer from
the same revision, as agents do when their steps overlap."""

from __future__ import annotations

import asyncio

from skillstate.clients import State


class ReadsTogether:
    """Put before an agent class: its first `read_state` waits at `barrier` until every agent sharing it read."""

    barrier: asyncio.Barrier | None = None

    async def read_state(self) -> State:
        state: State = await super().read_state()  # type: ignore[misc]
        if self.barrier is not None:
            barrier, self.barrier = self.barrier, None
            await barrier.wait()
        return state
