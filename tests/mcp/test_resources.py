"""The resources of `skillstate mcp` (an execution's state, a skill), subscriptions to a state fed by Watch in
both of the protocol's forms, and the SKILL.state step prompt, over stdio against a real server."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import (
    TextContent,
    TextResourceContents,
)

from skillstate.agents.protocol.prompts import SKILL_STATE_FORMAT
from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.server.rpc.app import RunningServer

from ..waiting import eventually
from .conftest import INITIAL, SCHEMA, STATE, WAIT, Updates, call, stdio, subscribe, unsubscribe, watchers


async def test_resources_read_a_state_and_a_skill(
    server_address: str, state: StateClient, registry: SkillRegistryClient
) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    await state.submit_patch("warehouse", {"shipped": 1}, agent_id="a", base_revision=0)
    async with stdio(server_address) as client:
        templates = await client.list_resource_templates()
        assert {t.uri_template: t.mime_type for t in templates.resource_templates} == {
            "skillstate://executions/{execution_id}/state": "application/json",
            "skillstate://skills/{name}": "text/markdown",
        }
        (content,) = (await client.read_resource(STATE)).contents
        assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
        document = json.loads(content.text)
        assert document["revision"] == 1 and document["state"] == {**INITIAL, "shipped": 1}
        assert content.text == json.dumps(document, sort_keys=True, separators=(",", ":"))  # canonical

        (skill,) = (await client.read_resource("skillstate://skills/ship-order")).contents
        assert isinstance(skill, TextResourceContents) and skill.mime_type == "text/markdown"
        assert "skill ship-order, version 1" in skill.text and "# Ship an order" in skill.text
        assert "## Prerequisites" in skill.text  # the whole skill, not a hydrated part of it

        with pytest.raises(MCPError, match="NOT_FOUND: execution 'nope' not found"):
            await client.read_resource("skillstate://executions/nope/state")
        with pytest.raises(MCPError, match="NOT_FOUND"):
            await client.read_resource("skillstate://skills/no-such-skill")


async def test_a_subscriber_hears_of_each_revision_until_it_unsubscribes(
    server: RunningServer, server_address: str, state: StateClient
) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    updates = Updates()
    async with stdio(server_address, updates=updates) as client:
        assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
        await subscribe(client, STATE)
        await eventually(lambda: watchers(server) == 1)  # the Watch starts at the head subscribe read: 0
        for revision in (1, 2):
            await state.submit_patch("warehouse", {"shipped": 1}, agent_id="sdk", base_revision=revision - 1)
            assert await updates.next() == STATE
            (content,) = (await client.read_resource(STATE)).contents
            assert isinstance(content, TextResourceContents) and json.loads(content.text)["revision"] == revision

        await unsubscribe(client, STATE)
        await eventually(lambda: watchers(server) == 0)
        await state.submit_patch("warehouse", {"shipped": 1}, agent_id="sdk", base_revision=2)
        assert updates.uris.empty()

        with pytest.raises(MCPError, match="NOT_FOUND"):
            await subscribe(client, "skillstate://executions/nope/state")
        with pytest.raises(MCPError, match="only execution state resources"):
            await subscribe(client, "skillstate://skills/ship-order")
        await subscribe(client, STATE)
        await eventually(lambda: watchers(server) == 1)
    # the client went away without unsubscribing: the session's end stops the Watch
    await eventually(lambda: watchers(server) == 0)


async def test_subscribers_share_one_watch(server: RunningServer, server_address: str, state: StateClient) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    first, second = Updates(), Updates()
    async with stdio(server_address, updates=first) as one, stdio(server_address, updates=second) as two:
        await subscribe(one, STATE)
        await subscribe(two, STATE)
        await eventually(lambda: watchers(server) == 2)  # one a process: a Watch per MCP server, not per subscriber
        await subscribe(one, STATE)  # again: still one subscription
        await state.submit_patch("warehouse", {"shipped": 1}, agent_id="sdk", base_revision=0)
        assert (await first.next(), await second.next()) == (STATE, STATE)
        await call(one, "get_state", execution_id="warehouse")  # answered after any notification sent before it
        assert first.uris.empty()


async def test_a_listen_stream_hears_of_each_revision_while_open(
    server: RunningServer, server_address: str, state: StateClient
) -> None:
    """subscriptions/listen, the 2026-07-28 form, which this SDK's client negotiates by itself."""
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    async with stdio(server_address, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        skill = "skillstate://skills/ship-order"
        async with client.listen(resource_subscriptions=[STATE, skill]) as listening:
            assert listening.honored.resource_subscriptions == [STATE]  # a skill is not watched
            await eventually(lambda: watchers(server) == 1)
            await state.submit_patch("warehouse", {"shipped": 1}, agent_id="sdk", base_revision=0)
            event = await asyncio.wait_for(anext(listening), WAIT)
            assert isinstance(event, ResourceUpdated) and event.uri == STATE
        await eventually(lambda: watchers(server) == 0)


async def test_the_prompt_is_the_skill_state_step(
    server_address: str, state: StateClient, registry: SkillRegistryClient
) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    async with stdio(server_address) as client:
        (prompt,) = (await client.list_prompts()).prompts
        assert prompt.name == "skill_state_step"
        assert {a.name: a.required for a in prompt.arguments or []} == {
            "skill": True, "execution_id": True, "observation": False, "task": False, "budget": False,
        }  # fmt: skip

        arguments = {"skill": "ship-order", "execution_id": "warehouse", "observation": "Order 7 is paid."}
        step, submit = (await client.get_prompt("skill_state_step", arguments)).messages
        assert step.role == submit.role == "user"
        assert isinstance(step.content, TextContent) and isinstance(submit.content, TextContent)
        text = step.content.text
        assert text.startswith("Instructions:\n# Skill: ship-order") and "# Ship an order" in text  # P
        state_json = json.dumps(INITIAL, separators=(",", ":"), sort_keys=True)
        assert f"Skill Execution State:\n```json\n{state_json}\n```" in text  # Σ
        assert "Latest Observation:\nOrder 7 is paid." in text  # O
        assert text.endswith(SKILL_STATE_FORMAT) and '"state_patch"' in text and '"action"' in text
        assert "base_revision 0" in submit.content.text and "submit_patch" in submit.content.text

        first = await client.get_prompt("skill_state_step", {"skill": "ship-order", "execution_id": "warehouse"})
        assert isinstance(first.messages[0].content, TextContent)
        assert "Latest Observation:\nNone yet" in first.messages[0].content.text
        with pytest.raises(MCPError, match="NOT_FOUND"):
            await client.get_prompt("skill_state_step", {"skill": "ship-order", "execution_id": "nope"})
        with pytest.raises(MCPError, match="NOT_FOUND"):
            await client.get_prompt("skill_state_step", {"skill": "no-such-skill", "execution_id": "warehouse"})
