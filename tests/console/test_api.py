"""The console's JSON API against the real server: what each endpoint answers, checked against what the SDK
reads from the server directly, and how failures map to HTTP statuses."""

from __future__ import annotations

import httpx
import pytest
from starlette.requests import Request

from skillstate.clients import (
    DataLossError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SkillRegistryClient,
    SkillstateError,
    StateClient,
    UnauthenticatedError,
    UnavailableError,
    ValidationError,
)
from skillstate.console.errors import server_error


async def test_the_executions_list_pages_by_id(http: httpx.AsyncClient, state: StateClient) -> None:
    for name in ("b-2", "a-1", "b-1"):
        await state.create_execution(name, initial_state={"n": 0})
    await state.submit_patch("b-1", {"n": 1}, agent_id="counter", base_revision=0)

    listed = (await http.get("/api/executions")).json()
    assert [e["execution_id"] for e in listed["executions"]] == ["a-1", "b-1", "b-2"]
    assert listed["next_page_token"] == ""
    b1 = listed["executions"][1]
    assert (b1["head_revision"], b1["agents"], b1["agent_count"], b1["compact_revision"]) == (1, ["counter"], 1, 0)
    assert b1["create_time"] <= b1["update_time"]

    first = (await http.get("/api/executions", params={"page_size": 2})).json()
    assert [e["execution_id"] for e in first["executions"]] == ["a-1", "b-1"]
    rest = (await http.get("/api/executions", params={"page_size": 2, "page_token": first["next_page_token"]})).json()
    assert [e["execution_id"] for e in rest["executions"]] == ["b-2"]
    only_b = (await http.get("/api/executions", params={"prefix": "b-"})).json()
    assert [e["execution_id"] for e in only_b["executions"]] == ["b-1", "b-2"]

    summary = (await http.get("/api/executions/b-1")).json()
    assert summary == b1
    missing = await http.get("/api/executions/b-")  # a prefix of ids, not an id
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"


async def test_state_at_head_and_at_each_revision(http: httpx.AsyncClient, state: StateClient, warehouse: str) -> None:
    for at in (None, 0, 1, 2):
        read = await state.get_state(warehouse, at_revision=at)
        got = (await http.get(f"/api/executions/{warehouse}/state", params={} if at is None else {"at": at})).json()
        assert got == {"revision": read.revision, "state": read.state, "state_hash": read.state_hash}
    assert (await http.get(f"/api/executions/{warehouse}/state")).json()["state"] == {
        "shipped": 2,
        "inventory": {"shelf_2": "item_9"},
    }
    past = await http.get(f"/api/executions/{warehouse}/state", params={"at": 3})
    assert past.status_code == 400 and past.json()["error"]["status"] == "OUT_OF_RANGE"


async def test_history_carries_patches_actions_and_resolutions(
    http: httpx.AsyncClient, state: StateClient, warehouse: str
) -> None:
    got = (await http.get(f"/api/executions/{warehouse}/history")).json()
    assert (got["head_revision"], got["compact_revision"], got["next_page_token"]) == (2, 0, "")
    first, second = got["revisions"]
    assert (first["revision"], first["agent_id"], first["base_revision"]) == (1, "picker", 0)
    assert first["applied_patch"] == {"shipped": 1, "inventory": {"shelf_1": None}}
    assert first["action"] == "Ship item_7 shelf_1"
    assert second["applied_patch"] == {"shipped": 2, "inventory": {"shelf_2": "item_9"}}
    assert second["resolutions"] == [{"path": "/shipped", "policy": "counter", "outcome": "combined"}]
    expected = [e async for e in state.history(warehouse)]
    assert [r["state_hash"] for r in got["revisions"]] == [e.state_hash for e in expected]
    assert [r["commit_time"][:19] for r in got["revisions"]] == [e.commit_time.isoformat()[:19] for e in expected]

    one = (await http.get(f"/api/executions/{warehouse}/history", params={"page_size": 1})).json()
    assert [r["revision"] for r in one["revisions"]] == [1] and one["next_page_token"]
    more = {"page_size": 1, "page_token": one["next_page_token"]}
    assert [r["revision"] for r in (await http.get(f"/api/executions/{warehouse}/history", params=more)).json()[
        "revisions"
    ]] == [2]  # fmt: skip
    ranged = {"from": 2, "to": 2}
    assert [r["revision"] for r in (await http.get(f"/api/executions/{warehouse}/history", params=ranged)).json()[
        "revisions"
    ]] == [2]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/executions/warehouse/state?at=x", "at"),
        ("/api/executions/warehouse/state?at=-1", "at"),
        ("/api/executions/warehouse/state?at=99999999999999999999", "at"),
        ("/api/executions/warehouse/state?at=1.5", "at"),
        ("/api/executions/warehouse/history?page_size=0", "page_size"),
        ("/api/executions/warehouse/history?page_size=201", "page_size"),
        ("/api/executions/warehouse/history?from=--1", "from"),
        ("/api/executions/warehouse/history?to=%F0%9F%92%A5", "to"),
        ("/api/executions?page_size=a", "page_size"),
        (f"/api/executions?prefix={'x' * 4097}", "prefix"),
        ("/api/executions/warehouse/events?from=3", "from"),
        ("/api/executions/warehouse/observations?after=-5", "after"),
        (f"/api/executions/warehouse/observations?skills={',s' * 101}", "skills"),
        ("/api/skills/ship-order?version=v1", "version"),
    ],
)
async def test_bad_parameters_are_400_naming_them(
    http: httpx.AsyncClient, warehouse: str, path: str, parameter: str
) -> None:
    answer = await http.get(path)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["status"], error["parameter"]) == ("INVALID_ARGUMENT", parameter)
    assert error["message"].startswith(f"{parameter}: ")


async def test_a_bad_last_event_id_is_400(http: httpx.AsyncClient, warehouse: str) -> None:
    answer = await http.get(f"/api/executions/{warehouse}/events", headers={"last-event-id": "seven"})
    assert answer.status_code == 400 and answer.json()["error"]["parameter"] == "Last-Event-ID"


@pytest.mark.parametrize(
    "path",
    [
        "/api/executions/nowhere",
        "/api/executions/nowhere/state",
        "/api/executions/nowhere/history",
        "/api/executions/nowhere/events",
        "/api/executions/nowhere/observations",
        "/api/skills/no-such-skill",
        "/api/no/such/endpoint",
    ],
)
async def test_what_does_not_exist_is_404(http: httpx.AsyncClient, path: str) -> None:
    answer = await http.get(path)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["status"] == "NOT_FOUND"


async def test_the_server_refusing_a_read_is_400_with_its_message(http: httpx.AsyncClient, warehouse: str) -> None:
    answer = await http.get(f"/api/executions/{warehouse}/history", params={"from": 2, "to": 1})
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "status": "INVALID_ARGUMENT",
        "message": "to_revision: 1 is before from_revision 2",
    }


async def test_only_get_reads_and_only_post_hydrates(http: httpx.AsyncClient, warehouse: str) -> None:
    assert (await http.post(f"/api/executions/{warehouse}/state")).status_code == 405
    assert (await http.get("/api/hydrate")).status_code == 405
    assert (await http.delete(f"/api/executions/{warehouse}")).status_code == 405


@pytest.mark.parametrize(
    ("body", "headers", "parameter"),
    [
        (b'{"query": "ship"}', {"content-type": "text/plain"}, "content-type"),
        (b"{not json", {}, "body"),
        (b'["ship"]', {}, "body"),
        (b'{"query": "ship", "budget_tokens": 10}', {}, "budget_tokens"),
        (b'{"query": ""}', {}, "query"),
        (b'{"query": 7}', {}, "query"),
        (b'{"query": "' + b"x" * 4097 + b'"}', {}, "query"),
        (b'{"query": "ship", "budget": 0}', {}, "budget"),
        (b'{"query": "ship", "budget": 100001}', {}, "budget"),
        (b'{"query": "ship", "budget": true}', {}, "budget"),
        (b'{"query": "ship", "skills": "ship-order"}', {}, "skills"),
        (b'{"query": "' + b"x" * 70_000 + b'"}', {}, "body"),
    ],
)
async def test_bad_hydrate_requests_are_400(
    http: httpx.AsyncClient, body: bytes, headers: dict[str, str], parameter: str
) -> None:
    answer = await http.post("/api/hydrate", content=body, headers={"content-type": "application/json", **headers})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["parameter"] == parameter


async def test_skills_their_graphs_and_hydration(http: httpx.AsyncClient, registry: SkillRegistryClient) -> None:
    listed = (await http.get("/api/skills")).json()
    names = [s["name"] for s in listed["skills"]]
    assert names == ["ship-order", "warehouse-maintenance", "warehouse-receiving", "warehouse-shipping"]
    assert listed["truncated"] is False

    got = (await http.get("/api/skills/warehouse-receiving")).json()
    direct = await registry.get_skill("warehouse-receiving")
    assert got["summary"]["name"] == "warehouse-receiving" and got["summary"]["version"] == 1
    assert [(s["index"], s["title"], s["role"]) for s in got["sections"]] == [
        (s.index, s.title, s.role) for s in direct.sections
    ]
    assert [(e["source"], e["target"], e["kind"], e["label"]) for e in got["edges"]] == list(direct.edges)
    # warehouse-receiving and warehouse-maintenance share a run of sections (When to use, State, Workflow): one macro
    assert [(m["name"], m["first_index"], m["section_count"]) for m in got["macros"]] == [("When to use", 1, 3)]
    assert (await http.get("/api/skills/warehouse-shipping")).json()["macros"] == []
    older = (await http.get("/api/skills/warehouse-receiving", params={"version": 1})).json()
    assert older["sections"] == got["sections"] and older["macros"] == []  # a named version: no hydration

    hydrated = (await http.post("/api/hydrate", json={"query": "ship the customer's order", "budget": 3000})).json()
    expected = await registry.hydrate("ship the customer's order", budget_tokens=3000)
    assert hydrated["context"] == expected.context and hydrated["token_count"] == expected.token_count > 0
    assert hydrated["coverage"]["anchors"] == list(expected.anchors)
    assert hydrated["coverage"]["covered"] == list(expected.anchors_covered)
    assert hydrated["coverage"]["dependencies_closed"] is expected.dependencies_closed
    assert {s["skill"] for s in hydrated["sections"]} == set(expected.source_skills)
    only = (await http.post("/api/hydrate", json={"query": "shelf", "skills": ["warehouse-shipping"]})).json()
    assert only["source_skills"] == ["warehouse-shipping"]
    unknown = await http.post("/api/hydrate", json={"query": "shelf", "skills": ["nope"]})
    assert unknown.status_code == 404 and "nope" in unknown.json()["error"]["message"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NotFoundError("gone"), 404),
        (PermissionDeniedError("not yours"), 403),
        (UnauthenticatedError("who are you"), 401),
        (ValidationError("bad"), 400),
        (OutOfRangeError("compacted"), 400),
        (UnavailableError("down"), 503),
        (ResourceExhaustedError("too many watchers"), 429),
        (DataLossError("damaged"), 502),
        (SkillstateError("unknown"), 502),
    ],
)
def test_each_status_has_its_http_status(error: SkillstateError, expected: int) -> None:
    """The statuses a test cannot easily get a real server to send (UNAVAILABLE without waiting out the
    SDK's retries, DATA_LOSS without damaging a log) go through the same table as the others above."""
    answer = server_error(Request({"type": "http", "method": "GET", "path": "/", "headers": []}), error)
    assert answer.status_code == expected
    status, message = error.status.name, error.message
    assert answer.body == f'{{"error":{{"status":"{status}","message":"{message}"}}}}'.encode()
