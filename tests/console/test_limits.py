"""The console's largest answers hold the event loop it shares with the server (`serve --console`) for less
than 50 ms: the largest state the server allows, and the largest page of history, for a state of long strings
(a state of as many bytes in small objects takes longer to decode: docs/console.md, limits)."""

from __future__ import annotations

import asyncio
import time

import httpx

from skillstate.clients import StateClient

BUDGET = 0.050
"""Seconds the loop may be held by one request, at most (docs/console.md)."""


class LoopWatch:
    """A task that wakes every millisecond and records the longest time the loop kept it waiting."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    async def stop(self) -> float:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return self.longest


async def test_the_largest_state_and_history_page_hold_the_loop_less_than_50_ms(
    http: httpx.AsyncClient, state: StateClient
) -> None:
    await state.create_execution("big")
    for i in range(4):  # four patches of just under 1 MiB each: a state near the server's 4 MiB limit
        part = {f"{j:05}": "x" * 90 for j in range(9_900)}
        await state.submit_patch("big", {f"part-{i}": part}, agent_id="writer", base_revision=i)
    for path in ("/api/executions/big/state", "/api/executions/big/history?page_size=200"):
        watch = LoopWatch()
        answer = await http.get(path)
        held = await watch.stop()
        assert answer.status_code == 200 and len(answer.content) > 3_900_000
        # the server's work, the console's and the test client's, all in this one loop
        assert held < BUDGET, f"{path} held the loop {held * 1000:.1f} ms"
