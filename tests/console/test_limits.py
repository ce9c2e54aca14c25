"""The console's largest answers hold the event loop it shares with the server (`serve --console`) for less
than 50 ms: the largest state the server allows, of small values (the console passes the server's JSON text
on undecoded), and the largest page of history, of long strings (its patches are decoded: a page of as many
bytes in small values takes longer, docs/console.md, limits)."""

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


async def held_by(http: httpx.AsyncClient, path: str) -> float:
    """Seconds the loop was held at most while the console answered `path` (the server's work, the console's
    and the test client's, all in this one loop)."""
    watch = LoopWatch()
    answer = await http.get(path)
    held = await watch.stop()
    assert answer.status_code == 200 and len(answer.content) > 3_500_000
    return held


async def test_the_largest_state_of_small_values_holds_the_loop_less_than_50_ms(
    http: httpx.AsyncClient, state: StateClient
) -> None:
    await state.create_execution("small")
    for i in range(4):  # 120,000 small objects in all, near the server's 4 MiB limit
        part = {f"{j:05}": {"n": j, "ok": True} for j in range(30_000)}
        await state.submit_patch("small", {f"part-{i}": part}, agent_id="writer", base_revision=i)
    for path in ("/api/executions/small/state", "/api/executions/small/state?at=4"):
        held = await held_by(http, path)
        assert held < BUDGET, f"{path} held the loop {held * 1000:.1f} ms"


async def test_the_largest_state_and_history_page_hold_the_loop_less_than_50_ms(
    http: httpx.AsyncClient, state: StateClient
) -> None:
    await state.create_execution("big")
    for i in range(4):  # four patches of just under 1 MiB each: a state near the server's 4 MiB limit
        part = {f"{j:05}": "x" * 90 for j in range(9_900)}
        await state.submit_patch("big", {f"part-{i}": part}, agent_id="writer", base_revision=i)
    for path in ("/api/executions/big/state", "/api/executions/big/history?page_size=200"):
        held = await held_by(http, path)
        assert held < BUDGET, f"{path} held the loop {held * 1000:.1f} ms"
