"""The client retries what a retry cannot duplicate, and only that, spread out by jitter and within a deadline."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest

from skillstate.clients import RetryPolicy, SkillstateError, StateClient, UnavailableError
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ..conftest import RestartableServer


async def test_a_submit_during_an_outage_applies_once_when_the_server_returns(restartable: RestartableServer) -> None:
    async with StateClient(restartable.address) as client:
        execution_id = (await client.create_execution()).execution_id
        await restartable.stop()

        with pytest.raises(UnavailableError):  # not retried: a lost reply would mean a second observation
            await client.publish_observation(execution_id, "*", "hello")

        submit = asyncio.create_task(client.submit_patch(execution_id, {"a": 1}, agent_id="x", base_revision=0))
        await asyncio.sleep(0.3)  # not a wait for the server: an outage this long is what the submit must outlast
        assert not submit.done(), "the submit should still be retrying"
        await restartable.start()
        result = await asyncio.wait_for(submit, 15)
        assert result.revision == 1
        assert (await client.get_state(execution_id)).revision == 1


def equal_jitter(attempt: int, draw: float, initial: float = 0.1, cap: float = 2.0) -> float:
    """The AWS Architecture Blog's "equal jitter", written out independently of RetryPolicy."""
    temp = min(cap, initial * 2**attempt)
    return temp / 2 + draw * (temp / 2)


def test_backoff_is_equal_jitter_of_the_capped_exponential() -> None:
    policy = RetryPolicy(random=random.Random(7).random)
    draws = random.Random(7)
    for attempt in range(12):
        assert policy.backoff(attempt) == pytest.approx(equal_jitter(attempt, draws.random()))
    assert RetryPolicy(random=lambda: 0.0).backoff(3) == pytest.approx(0.4)  # the floor: half the exponential
    assert RetryPolicy(random=lambda: 1.0).backoff(3) == pytest.approx(0.8)
    assert RetryPolicy(random=lambda: 1.0).backoff(10_000) == pytest.approx(2.0)  # capped, and no overflow
    custom = RetryPolicy(initial_backoff=0.5, max_backoff=3.0, random=lambda: 0.25)
    assert custom.backoff(2) == pytest.approx(equal_jitter(2, 0.25, 0.5, 3.0))


def test_clients_cut_by_one_failure_do_not_retry_in_lockstep() -> None:
    first = [RetryPolicy(random=random.Random(seed).random).backoff(0) for seed in range(100)]
    assert all(0.05 <= b <= 0.1 for b in first)
    assert len({round(b, 6) for b in first}) > 90 and max(first) - min(first) > 0.04  # spread over [0.05, 0.1]
    unseeded = [RetryPolicy().backoff(4) for _ in range(50)]  # the default draws from `random` as well
    assert len(set(unseeded)) > 1


async def test_a_call_gives_up_by_the_deadline_when_the_server_is_down(restartable: RestartableServer) -> None:
    policy = RetryPolicy(attempts=100, deadline=1.0, random=lambda: 0.5)  # waits 0.075, 0.15, 0.3, then 0.6
    async with StateClient(restartable.address, retry=policy) as client:
        execution_id = (await client.create_execution()).execution_id
        await restartable.stop()
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            await client.get_state(execution_id)
        took = time.monotonic() - started
        assert 0.5 <= took < 1.0  # retried through 0.525 s of backoff; 0.6 more would pass the deadline

        started = time.monotonic()  # a stream reopens under the same deadline
        with pytest.raises(UnavailableError):
            async for _ in client.watch(execution_id):
                pass
        assert 0.5 <= time.monotonic() - started < 1.0


class StuckLog(MemoryRevisionLog):
    """Commits wait until the test lets them go: a server that takes calls and answers none."""

    def __init__(self) -> None:
        super().__init__()
        self.released = asyncio.Event()

    async def commit(self, batch: Batch) -> None:
        await self.released.wait()
        await super().commit(batch)


async def test_each_attempt_is_cut_to_what_is_left_of_the_deadline() -> None:
    log = StuckLog()
    running = await start_server(log, "127.0.0.1:0")
    try:
        policy = RetryPolicy(deadline=0.5)
        async with StateClient(f"127.0.0.1:{running.port}", retry=policy, timeout=30.0) as client:
            execution_id = (await client.create_execution()).execution_id
            started = time.monotonic()
            with pytest.raises(SkillstateError) as cut:
                await client.submit_patch(execution_id, {"a": 1}, agent_id="a", base_revision=0)
            assert cut.value.status == grpc.StatusCode.DEADLINE_EXCEEDED
            assert 0.4 <= time.monotonic() - started < 5.0  # the deadline, not the 30 s call timeout
        async with StateClient(f"127.0.0.1:{running.port}", retry=RetryPolicy(deadline=None), timeout=0.3) as client:
            with pytest.raises(SkillstateError) as cut:  # without a deadline the call's own timeout holds
                await client.submit_patch(execution_id, {"b": 1}, agent_id="a", base_revision=0)
            assert cut.value.status == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        log.released.set()
        await running.stop(grace=0)
