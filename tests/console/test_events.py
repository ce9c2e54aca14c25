"""The console's event streams against the real server: revisions fed by Watch arrive after an SDK patch and
resume after Last-Event-ID, observations are read without taking any from a consumer group, the list is sent
again when it changes, and every stream (and its gRPC stream upstream) ends when the browser leaves or the
console stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from skillstate.clients import Observation, SkillRegistryClient, StateClient
from skillstate.console.main import RunningConsole
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc.app import RunningServer

from ..waiting import eventually
from .conftest import observation_streams, watchers


class Stream:
    """An open event stream, read one event at a time: (name, data, id)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 10) -> tuple[str, Any, str | None]:
        name, data, event_id = "message", None, None
        async with asyncio.timeout(timeout):
            async for line in self._lines:
                if not line:
                    if data is not None:
                        return name, json.loads(data), event_id
                    continue
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    name = value
                elif field == "data":
                    data = value
                elif field == "id":
                    event_id = value
        raise AssertionError("the stream ended")

    async def ended(self, timeout: float = 10) -> bool:
        async with asyncio.timeout(timeout):
            async for line in self._lines:
                assert line == "" or line.startswith((":", "retry")), f"an event after the end: {line}"
        return True


@contextlib.asynccontextmanager
async def stream(http: httpx.AsyncClient, path: str, **headers: str) -> AsyncIterator[Stream]:
    async with http.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


async def test_a_revision_arrives_after_an_sdk_patch(
    http: httpx.AsyncClient, state: StateClient, warehouse: str, server: RunningServer
) -> None:
    async with stream(http, f"/api/executions/{warehouse}/events") as events:  # from the head, revision 2
        await eventually(lambda: watchers(server) == 1)
        result = await state.submit_patch(warehouse, {"inventory": {"shelf_3": "item_1"}}, agent_id="stocker",
                                          base_revision=2, action="Store item_1 shelf_3")  # fmt: skip
        name, data, event_id = await events.next()
    assert (name, event_id) == ("revision", "3")
    assert data["revision"] == result.revision == 3
    assert (data["agent_id"], data["base_revision"], data["action"]) == ("stocker", 2, "Store item_1 shelf_3")
    assert data["applied_patch"] == {"inventory": {"shelf_3": "item_1"}}
    assert data["state_hash"] == result.state_hash


async def test_a_stream_resumes_after_the_last_event_id(http: httpx.AsyncClient, warehouse: str) -> None:
    async with stream(http, f"/api/executions/{warehouse}/events?from=0") as events:
        assert [(await events.next())[2] for _ in range(2)] == ["1", "2"]
    async with stream(http, f"/api/executions/{warehouse}/events?from=0", **{"last-event-id": "1"}) as events:
        name, data, event_id = await events.next()
        assert (name, event_id, data["agent_id"]) == ("revision", "2", "stocker")


@pytest.mark.parametrize("engine_config", [EngineConfig(snapshot_every=2)])
async def test_a_stream_from_a_compacted_revision_starts_with_the_snapshot(
    http: httpx.AsyncClient, state: StateClient, warehouse: str
) -> None:
    assert await state.compact(warehouse, 2) == 2
    async with stream(http, f"/api/executions/{warehouse}/events?from=0") as events:
        name, data, event_id = await events.next()
    assert (name, event_id) == ("snapshot", "2")
    assert data["state"] == (await state.get_state(warehouse)).state and data["compact_revision"] == 2


async def test_the_upstream_watch_ends_when_the_browser_goes_away(
    http: httpx.AsyncClient, warehouse: str, server: RunningServer
) -> None:
    async with stream(http, f"/api/executions/{warehouse}/events"):
        await eventually(lambda: watchers(server) == 1)
    await eventually(lambda: watchers(server) == 0)


async def test_stopping_the_console_ends_its_open_streams(
    console: RunningConsole, http: httpx.AsyncClient, warehouse: str, server: RunningServer
) -> None:
    async with (
        stream(http, f"/api/executions/{warehouse}/events") as events,
        stream(http, f"/api/executions/{warehouse}/observations") as observed,
    ):
        await eventually(lambda: watchers(server) == 1 and observation_streams(server) == 1)
        started = time.monotonic()
        await console.stop()
        assert time.monotonic() - started < 1.5
        assert (await observed.next())[0] == "reading"
        assert await observed.ended() and await events.ended()
    assert watchers(server) == 0 and observation_streams(server) == 0


async def test_observations_are_read_without_taking_them_from_a_consumer_group(
    http: httpx.AsyncClient, state: StateClient, warehouse: str
) -> None:
    async with stream(http, f"/api/executions/{warehouse}/observations?skills=pick") as observed:
        assert await observed.next() == ("reading", {"agent": "console", "skills": ["pick"], "after": 0}, None)
        sequence = await state.publish_observation(warehouse, "skill:pick", {"order": 7}, source="shop")
        name, data, event_id = await observed.next()
        assert (name, event_id, data["payload"], data["to"], data["delivery"]) == (
            "observation", str(sequence), {"order": 7}, "skill:pick", 0
        )  # fmt: skip
        # an agent of a consumer group for the skill joins after the console read it: the group still has it
        member: AsyncIterator[Observation] = state.observations(warehouse, "picker-1", skills=["pick"], group="g")
        async with contextlib.aclosing(member) as delivered:  # type: ignore[type-var]
            first = await asyncio.wait_for(anext(delivered), 10)
        assert (first.sequence, first.payload, first.delivery) == (sequence, {"order": 7}, 1)
        await state.publish_observation(warehouse, "*", "to everyone")
        await state.publish_observation(warehouse, "someone-else", "not for the console")
        await state.publish_observation(warehouse, "console", "for the console")
        assert [(await observed.next())[1]["payload"] for _ in range(2)] == ["to everyone", "for the console"]
    resumed = f"/api/executions/{warehouse}/observations?skills=pick"
    async with stream(http, resumed, **{"last-event-id": str(sequence)}) as observed:
        assert (await observed.next())[1]["after"] == sequence
        assert (await observed.next())[1]["payload"] == "to everyone"


async def test_on_an_open_server_observations_of_every_library_skill_are_read(
    http: httpx.AsyncClient, registry: SkillRegistryClient, warehouse: str
) -> None:
    async with stream(http, f"/api/executions/{warehouse}/observations?agent=stocker") as observed:
        name, reading, _ = await observed.next()
    assert name == "reading" and reading["agent"] == "stocker"
    assert reading["skills"] == [s.name async for s in registry.list_skills()]


async def test_the_list_stream_sends_the_page_again_when_it_changed(
    http: httpx.AsyncClient, state: StateClient, warehouse: str
) -> None:
    async with stream(http, "/api/live/executions?prefix=ware") as listing:
        name, page, _ = await listing.next()
        assert name == "page" and [e["execution_id"] for e in page["executions"]] == ["warehouse"]
        await state.create_execution("warehouse-2")
        await state.create_execution("elsewhere")
        name, page, _ = await listing.next()
        assert name == "page" and [e["execution_id"] for e in page["executions"]] == ["warehouse", "warehouse-2"]
        await state.submit_patch("warehouse-2", {"x": 1}, agent_id="a", base_revision=0)
        name, page, _ = await listing.next()
        assert [e["head_revision"] for e in page["executions"]] == [2, 1]


async def test_a_stream_of_a_deleted_execution_ends_with_a_failure_event(
    http: httpx.AsyncClient, state: StateClient, warehouse: str, server: RunningServer
) -> None:
    async with stream(http, f"/api/executions/{warehouse}/events") as events:
        await eventually(lambda: watchers(server) == 1)
        await state.delete_execution(warehouse)
        name, data, _ = await events.next()
        assert (name, data["error"]["status"]) == ("failure", "NOT_FOUND")
        assert await events.ended()
