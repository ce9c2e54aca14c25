"""A patch and its action are one: the action reaches watchers (the world) exactly when its revision commits."""

from __future__ import annotations

import pytest

from skillstate.clients import ConflictError, RevisionEvent, StateClient

SCHEMA = {"type": "object", "properties": {"owner": {"x-merge": "lww"}, "slot": {"type": "string"}}}


async def committed_actions(client: StateClient, execution_id: str) -> list[tuple[int, str, object]]:
    return [(r.revision, r.agent_id, r.action) async for r in client.history(execution_id)]


async def test_a_refused_patch_carries_its_action_nowhere(client: StateClient) -> None:
    execution_id = (await client.create_execution(schema=SCHEMA, initial_state={"slot": "free"})).execution_id
    await client.submit_patch(execution_id, {"slot": "ada"}, agent_id="ada", base_revision=0, action="take slot")
    with pytest.raises(ConflictError):  # `slot` is `reject`: bob's stale write of another value is refused
        await client.submit_patch(execution_id, {"slot": "bob"}, agent_id="bob", base_revision=0, action="take slot")
    assert await committed_actions(client, execution_id) == [(1, "ada", "take slot")]


async def test_an_accepted_write_that_loses_under_lww_still_commits_its_action(client: StateClient) -> None:
    """The action belongs to the revision, not to the value: bob's write of `owner` loses to ada's greater
    stamp (ada wrote on a later base), yet bob's patch is accepted, commits a revision, and its action takes
    effect. An agent whose action must depend on winning writes a `reject` path (as claims do)."""
    execution_id = (await client.create_execution(schema=SCHEMA, initial_state={"slot": "free"})).execution_id
    await client.submit_patch(execution_id, {"slot": "x"}, agent_id="env", base_revision=0)
    await client.submit_patch(execution_id, {"owner": "ada"}, agent_id="ada", base_revision=1, action="ada acts")
    lost = await client.submit_patch(execution_id, {"owner": "bob"}, agent_id="bob", base_revision=0, action="bob acts")
    assert [(r.path, r.outcome) for r in lost.resolutions] == [("/owner", "head_kept")]
    assert (await client.get_state(execution_id)).state["owner"] == "ada"
    watched: list[RevisionEvent] = []
    async for revision in client.watch(execution_id):
        assert isinstance(revision, RevisionEvent)
        watched.append(revision)
        if len(watched) == 3:
            break
    assert [(r.revision, r.agent_id, r.action) for r in watched] == [(1, "env", None), (2, "ada", "ada acts"),
                                                                    (3, "bob", "bob acts")]  # fmt: skip
