"""Every tool of `skillstate mcp`, driven over stdio by the official MCP client against a real server: what it
answers, a real conflict and the re-read that resolves it, the bounded long-poll, and the errors a model reads."""

from __future__ import annotations

import asyncio
import time

from skillstate.clients import SkillRegistryClient, StateClient
from skillstate.server.rpc.app import RunningServer

from ..waiting import eventually
from .conftest import INITIAL, SCHEMA, call, observation_streams, refused, stdio

TOOLS = {
    "list_executions", "get_state", "submit_patch", "get_history", "publish_observation", "next_observations",
    "list_skills", "hydrate_skill",
}  # fmt: skip


async def test_the_tools_read_write_and_resolve_a_conflict(server_address: str, state: StateClient) -> None:
    await state.create_execution("warehouse", schema=SCHEMA, initial_state=INITIAL)
    await state.create_execution("other", initial_state={})
    async with stdio(server_address) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        assert all(tool.output_schema is not None for tool in listed.tools)  # structured output everywhere

        executions = await call(client, "list_executions", prefix="ware")
        assert [e["execution_id"] for e in executions["executions"]] == ["warehouse"]
        assert executions["executions"][0]["head_revision"] == 0
        first = await call(client, "list_executions", limit=1)
        assert [e["execution_id"] for e in first["executions"]] == ["other"] and first["next_page_token"]
        rest = await call(client, "list_executions", limit=1, page_token=first["next_page_token"])
        assert [e["execution_id"] for e in rest["executions"]] == ["warehouse"]

        read = await call(client, "get_state", execution_id="warehouse")
        assert read["revision"] == 0 and read["state"] == INITIAL and len(read["state_hash"]) == 64
        assert list(read) == sorted(read)  # canonical key order
        shelf = await call(client, "get_state", execution_id="warehouse", pointer="/inventory/shelf_1")
        assert shelf["value"] == "item_7" and "state" not in shelf

        # two agents read revision 0; the counter and the shelves merge, `status` (reject) conflicts
        picker = await call(
            client, "submit_patch", execution_id="warehouse", base_revision=0, agent_id="picker",
            patch={"shipped": 1, "inventory": {"shelf_1": None}, "status": "picking"}, action="Ship item_7 shelf_1",
        )  # fmt: skip
        assert picker["status"] == "committed" and picker["revision"] == 1 and picker["resolutions"] == []
        stocker = await call(
            client, "submit_patch", execution_id="warehouse", base_revision=0, agent_id="stocker",
            patch={"shipped": 1, "status": "stocking"},
        )  # fmt: skip
        assert stocker == {
            "execution_id": "warehouse",
            "status": "conflict",
            "conflict": {"paths": ["/status"], "head_revision": 1, "message": stocker["conflict"]["message"]},
        }
        assert "re-read" in stocker["conflict"]["message"]
        # the model re-reads as told, and its step goes through on the new revision
        again = await call(client, "get_state", execution_id="warehouse")
        assert again["revision"] == 1 and again["state"]["status"] == "picking"
        stocker = await call(
            client, "submit_patch", execution_id="warehouse", base_revision=0, agent_id="stocker",
            patch={"shipped": 1, "inventory": {"shelf_2": "item_9"}},
        )  # fmt: skip
        assert stocker["revision"] == 2
        assert stocker["resolutions"] == [{"outcome": "combined", "path": "/shipped", "policy": "counter"}]
        assert (await state.get_state("warehouse")).state == {
            "shipped": 2, "inventory": {"shelf_2": "item_9"}, "status": "picking",
        }  # fmt: skip

        old = await call(client, "get_state", execution_id="warehouse", at_revision=0)
        assert old["revision"] == 0 and old["state"] == INITIAL
        history = await call(client, "get_history", execution_id="warehouse")
        assert [(r["revision"], r["agent_id"], r["action"]) for r in history["revisions"]] == [
            (1, "picker", "Ship item_7 shelf_1"),
            (2, "stocker", None),
        ]
        assert history["head_revision"] == 2 and history["revisions"][1]["base_revision"] == 0
        page = await call(client, "get_history", execution_id="warehouse", from_revision=2, limit=1)
        assert [r["revision"] for r in page["revisions"]] == [2]


async def test_a_patch_sent_again_with_its_key_applies_once(server_address: str, state: StateClient) -> None:
    await state.create_execution("counter", schema=SCHEMA, initial_state=INITIAL)
    async with stdio(server_address) as client:
        sent = {"execution_id": "counter", "patch": {"shipped": 1}, "base_revision": 0, "agent_id": "a"}
        once = await call(client, "submit_patch", **sent, client_patch_id="step-1")
        twice = await call(client, "submit_patch", **sent, client_patch_id="step-1")
        assert (once["revision"], once["duplicate"]) == (1, False)
        assert (twice["revision"], twice["duplicate"]) == (1, True)
        assert (await state.get_state("counter")).state["shipped"] == 1


async def test_errors_name_the_status_or_the_argument(server_address: str, state: StateClient) -> None:
    await state.create_execution("x", initial_state={"orders": [{"id": 7}]})
    async with stdio(server_address) as client:
        assert "NOT_FOUND: execution 'nope' not found" in await refused(client, "get_state", execution_id="nope")
        assert "NOT_FOUND" in await refused(client, "get_history", execution_id="nope")
        missing = await refused(client, "submit_patch", execution_id="nope", patch={}, base_revision=0, agent_id="a")
        assert "NOT_FOUND" in missing
        assert "OUT_OF_RANGE" in await refused(client, "get_state", execution_id="x", at_revision=5)
        ahead = await refused(client, "submit_patch", execution_id="x", patch={"n": 1}, base_revision=9, agent_id="a")
        assert "FAILED_PRECONDITION" in ahead

        for pointer, problem in [
            ("orders", "it must be empty or start with '/'"),
            ("/orders/1", "is not an index of the 1-item array at '/orders'"),
            ("/orders/0/id/x", "'/orders/0/id' is a number, not an object or array"),
            ("/missing", "the object at the root has no member 'missing'"),
            ("/a~2", "'~' must be followed by 0 or 1"),
        ]:
            message = await refused(client, "get_state", execution_id="x", pointer=pointer)
            assert f"argument 'pointer': {pointer!r}" in message and problem in message
        assert (await call(client, "get_state", execution_id="x", pointer="/orders/0/id"))["value"] == 7

        negative = await refused(client, "get_state", execution_id="x", at_revision=-1)
        assert "at_revision" in negative and "greater than or equal to 0" in negative
        assert "base_revision" in await refused(client, "submit_patch", execution_id="x", patch={})
        assert "timeout_seconds" in await refused(client, "next_observations", execution_id="x", timeout_seconds=61)
        assert "patch" in await refused(client, "submit_patch", execution_id="x", patch=[1], base_revision=0)


async def test_observations_are_published_and_long_polled(
    server: RunningServer, server_address: str, state: StateClient
) -> None:
    await state.create_execution("obs", initial_state={})
    async with stdio(server_address) as client:
        first = await call(client, "publish_observation", execution_id="obs", to="picker", payload={"order": 7})
        await call(client, "publish_observation", execution_id="obs", to="skill:ship", payload="parcel", kind="alert")
        await call(client, "publish_observation", execution_id="obs", to="someone-else", payload=0)
        assert first["sequence"] == 1

        started = time.monotonic()
        got = await call(client, "next_observations", execution_id="obs", agent_id="picker", skills=["ship"])
        assert time.monotonic() - started < 5  # the backlog at once, not after the 20 s timeout
        assert [(o["sequence"], o["payload"]) for o in got["observations"]] == [(1, {"order": 7}), (2, "parcel")]
        assert got["observations"][1]["kind"] == "alert" and got["observations"][1]["to"] == "skill:ship"
        assert got["next_after_sequence"] == 2 and not got["timed_out"]

        # nothing new: the call returns empty once its timeout has passed, not before and not much after
        started = time.monotonic()
        empty = await call(
            client, "next_observations", execution_id="obs", agent_id="picker", skills=["ship"], after_sequence=2,
            timeout_seconds=1,
        )  # fmt: skip
        assert empty == {"execution_id": "obs", "observations": [], "next_after_sequence": 2, "timed_out": True}
        assert 1 <= time.monotonic() - started < 5

        # a waiting call answers as soon as an observation is published
        waiting = asyncio.create_task(
            client.call_tool(
                "next_observations",
                {"execution_id": "obs", "agent_id": "picker", "after_sequence": 3, "timeout_seconds": 60},
            )
        )
        await eventually(lambda: observation_streams(server) == 1)  # the call waits on the server
        started = time.monotonic()
        await state.publish_observation("obs", "*", {"event": "restock"})
        result = await asyncio.wait_for(waiting, 10)
        assert time.monotonic() - started < 5
        assert result.structured_content is not None
        assert [o["payload"] for o in result.structured_content["observations"]] == [{"event": "restock"}]
        assert result.structured_content["next_after_sequence"] == 4


async def test_skills_are_listed_and_hydrated(server_address: str, registry: SkillRegistryClient) -> None:
    async with stdio(server_address) as client:
        skills = await call(client, "list_skills")
        assert [s["name"] for s in skills["skills"]] == ["ship-order"] and not skills["truncated"]
        assert skills["skills"][0]["version"] == 1 and "paid customer order" in skills["skills"][0]["description"]

        hydrated = await call(client, "hydrate_skill", query="ship the customer's order", budget=3000)
        assert "# Ship an order" in hydrated["context"] and hydrated["source_skills"] == ["ship-order"]
        assert 0 < hydrated["token_count"] <= 3000 and hydrated["hydration_id"]
        assert {"ship", "order"} <= set(hydrated["coverage"]["anchors_covered"])
        assert "NOT_FOUND" in await refused(client, "hydrate_skill", query="ship", skills=["no-such-skill"])
