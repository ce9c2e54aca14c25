"""20 agents writing one execution at once through the real client, under each merge policy."""

from __future__ import annotations

import asyncio

import pytest

from skillstate.clients import ConflictError, StateClient

AGENTS = [f"agent-{i:02d}" for i in range(20)]


async def create(client: StateClient, policy: str, initial: object) -> str:
    schema = {"type": "object", "properties": {"v": {"x-merge": policy}}}
    return (await client.create_execution(schema=schema, initial_state={"v": initial})).execution_id


async def all_at_base_zero(client: StateClient, execution_id: str, patch_of) -> list:
    """Every agent submits at once, each against revision 0."""
    return await asyncio.gather(
        *(client.submit_patch(execution_id, patch_of(i, a), agent_id=a, base_revision=0) for i, a in enumerate(AGENTS)),
        return_exceptions=True,
    )


async def final(client: StateClient, execution_id: str) -> object:
    return (await client.get_state(execution_id)).state["v"]


async def test_reject_with_read_and_retry_loses_no_write(client: StateClient) -> None:
    """Optimistic concurrency: read, modify, submit against what was read, retry on ABORTED."""
    execution_id = await create(client, "reject", [])

    async def join(agent: str) -> int:
        conflicts = 0
        while True:
            current = await client.get_state(execution_id)
            try:
                await client.submit_patch(
                    execution_id, {"v": [*current.state["v"], agent]}, agent_id=agent, base_revision=current.revision
                )
                return conflicts
            except ConflictError as e:
                assert "/v" in e.message and "head is revision" in e.message
                conflicts += 1

    conflicts = await asyncio.gather(*(join(a) for a in AGENTS))
    assert sorted(await final(client, execution_id)) == AGENTS
    assert (await client.get_state(execution_id)).revision == len(AGENTS)
    assert sum(conflicts) > 0, "the agents never actually raced"


async def test_lww_keeps_the_greatest_stamp(client: StateClient) -> None:
    execution_id = await create(client, "lww", "nobody")
    results = await all_at_base_zero(client, execution_id, lambda i, a: {"v": a})
    assert not any(isinstance(r, Exception) for r in results)
    assert await final(client, execution_id) == max(AGENTS)


async def test_counter_adds_every_delta(client: StateClient) -> None:
    execution_id = await create(client, "counter", 100)
    await all_at_base_zero(client, execution_id, lambda i, a: {"v": 100 + i})
    assert await final(client, execution_id) == 100 + sum(range(20))


@pytest.mark.parametrize(("policy", "expected"), [("max", 19), ("min", -19)])
async def test_max_and_min(client: StateClient, policy: str, expected: int) -> None:
    execution_id = await create(client, policy, 0)
    sign = 1 if policy == "max" else -1
    await all_at_base_zero(client, execution_id, lambda i, a: {"v": sign * i})
    assert await final(client, execution_id) == expected


async def test_set_keeps_every_addition_and_removal(client: StateClient) -> None:
    execution_id = await create(client, "set", ["keep", "drop"])
    await all_at_base_zero(client, execution_id, lambda i, a: {"v": ["keep", a] if i else ["keep"]})
    assert await final(client, execution_id) == sorted(["keep", *AGENTS[1:]])


async def test_append_keeps_every_item_once_in_commit_order(client: StateClient) -> None:
    execution_id = await create(client, "append", ["start"])
    await all_at_base_zero(client, execution_id, lambda i, a: {"v": ["start", a]})
    log = await final(client, execution_id)
    history = [e async for e in client.history(execution_id)]
    assert log == ["start", *(e.agent_id for e in history)]
    assert sorted(log[1:]) == AGENTS


async def test_text_merges_every_edit(client: StateClient) -> None:
    execution_id = await create(client, "text", "Plan:\n")
    await all_at_base_zero(client, execution_id, lambda i, a: {"v": f"Plan:\n- step by {a}\n"})
    merged = await final(client, execution_id)
    assert isinstance(merged, str) and merged.startswith("Plan:\n")
    for agent in AGENTS:
        assert merged.count(f"by {agent}\n") == 1


async def test_disjoint_keys_never_conflict(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    results = await all_at_base_zero(client, execution_id, lambda i, a: {a: {"done": True}})
    assert not any(isinstance(r, Exception) for r in results)
    assert sorted((await client.get_state(execution_id)).state) == AGENTS


async def test_a_conflict_is_answered_only_once_the_winning_revision_can_be_read(client: StateClient) -> None:
    """An agent told ABORTED re-reads at once: it must see the change it lost to, not the old state."""
    execution_id = await create(client, "reject", 0)

    async def submit_or_reread(base: int, value: int, agent: str) -> int | None:
        try:
            await client.submit_patch(execution_id, {"v": value}, agent_id=agent, base_revision=base)
        except ConflictError:
            return (await client.get_state(execution_id)).revision
        return None

    for round_ in range(100):  # two agents a round: the loser's re-read races the winner's commit
        base = (await client.get_state(execution_id)).revision
        seen = await asyncio.gather(*(submit_or_reread(base, i, a) for i, a in enumerate(AGENTS[:2])))
        assert seen.count(None) == 1  # one write won
        assert all(revision is None or revision > base for revision in seen), f"round {round_}: stale re-read"
