"""Every bad request gets its status code and a message naming the field or path, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import pytest

from skillstate.server.rpc.app import RunningServer
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "name": {"type": "string"}}}
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.StateServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.StateServiceStub(channel)


def nested(depth: int) -> str:
    return '{"n":1,"deep":' + "[" * depth + "]" * depth + "}"


# (name, SubmitPatchRequest fields, expected status, text the message must contain)
PATCH_CASES = [
    ("not json", {"patch_json": "{not json"}, INVALID, "patch_json: not valid JSON"),
    ("array patch", {"patch_json": "[1,2]"}, INVALID, "patch_json: must be a JSON object, got array"),
    ("scalar patch", {"patch_json": "3"}, INVALID, "patch_json: must be a JSON object, got integer"),
    ("null patch", {"patch_json": "null"}, INVALID, "got null"),
    ("empty patch text", {"patch_json": ""}, INVALID, "patch_json: not valid JSON"),
    ("NaN", {"patch_json": '{"n": NaN}'}, INVALID, "patch_json: not valid JSON"),
    ("Infinity", {"patch_json": '{"n": Infinity}'}, INVALID, "patch_json: not valid JSON"),
    (
        "integer over 64 bits",
        {"patch_json": '{"n": 18446744073709551616}'},
        INVALID,
        "patch_json: integer 18446744073709551616 is outside the 64-bit range",
    ),
    ("integer under 64 bits", {"patch_json": '{"n": -9223372036854775809}'}, INVALID, "is outside the 64-bit range"),
    ("number over double", {"patch_json": '{"n": 1e400}'}, INVALID, "patch_json: not valid JSON"),
    ("lone surrogate escape", {"patch_json": '{"name": "\\ud800"}'}, INVALID, "patch_json: not valid JSON"),
    (
        "huge string",
        {"patch_json": json.dumps({"name": "x" * (1 << 20)})},
        INVALID,
        "exceeds the limit of 1048576 bytes",
    ),
    ("too deep", {"patch_json": nested(64)}, INVALID, "patch_json: nesting depth 65 exceeds the limit of 64"),
    ("schema violation", {"patch_json": '{"n": "seven"}'}, INVALID, "/n: 'seven' is not of type 'integer' (type)"),
    ("bad action", {"action_json": "{oops"}, INVALID, "action_json: not valid JSON"),
    ("missing agent", {"agent_id": ""}, INVALID, "agent_id: must not be empty"),
    ("control char in agent", {"agent_id": "a\nb"}, INVALID, "agent_id: must not contain control characters"),
    ("negative base", {"base_revision": -1}, INVALID, "base_revision: must be >= 0"),
    (
        "future base",
        {"base_revision": 99},
        grpc.StatusCode.FAILED_PRECONDITION,
        "base_revision: 99 is ahead of the head revision 1",
    ),
    ("unknown execution", {"execution_id": "nope"}, grpc.StatusCode.NOT_FOUND, "execution 'nope' not found"),
    (
        "stale conflict",
        {"base_revision": 0, "patch_json": '{"n": 5}'},
        grpc.StatusCode.ABORTED,
        "conflict at /n (policy reject); head is revision 1",
    ),
]


@pytest.mark.parametrize(("fields", "code", "text"), [c[1:] for c in PATCH_CASES], ids=[c[0] for c in PATCH_CASES])
async def test_bad_patch_is_refused_and_changes_nothing(
    stub: pb_grpc.StateServiceStub, fields: dict, code: grpc.StatusCode, text: str
) -> None:
    await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="x", schema_json=json.dumps(SCHEMA)))
    await stub.SubmitPatch(pb.SubmitPatchRequest(execution_id="x", agent_id="a", base_revision=0, patch_json='{"n":1}'))
    before = await stub.GetState(pb.GetStateRequest(execution_id="x"))
    request = {"execution_id": "x", "agent_id": "b", "base_revision": 1, "patch_json": '{"n": 2}', **fields}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SubmitPatch(pb.SubmitPatchRequest(**request))
    assert caught.value.code() == code
    assert text in caught.value.details()
    assert await stub.GetState(pb.GetStateRequest(execution_id="x")) == before


async def test_invalid_utf8_is_invalid_argument(server: RunningServer, stub: pb_grpc.StateServiceStub) -> None:
    await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="x"))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        raw = channel.unary_unary("/skillstate.state.v1.StateService/SubmitPatch", request_serializer=lambda b: b)
        request = pb.SubmitPatchRequest(execution_id="x", agent_id="a").SerializeToString()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await raw(request + b"\x22\x03\xff\xfe{")  # field 4, patch_json: three bytes that are not UTF-8
    assert caught.value.code() == INVALID
    assert "bad UTF-8" in caught.value.details()
    assert (await stub.GetState(pb.GetStateRequest(execution_id="x"))).revision == 0


CREATE_CASES = [
    ("taken id", {"execution_id": "x"}, grpc.StatusCode.ALREADY_EXISTS, "execution 'x' already exists"),
    ("bad id", {"execution_id": "has space"}, INVALID, "execution_id: must be 1-128 characters"),
    ("schema not json", {"schema_json": "{"}, INVALID, "schema_json: not valid JSON"),
    ("schema not a schema", {"schema_json": '{"type": 5}'}, INVALID, "schema_json: not a valid Draft 2020-12 schema"),
    ("unknown policy", {"schema_json": '{"properties": {"a": {"x-merge": "sum"}}}'}, INVALID, "x-merge must be one of"),
    ("state not object", {"initial_state_json": "[]"}, INVALID, "initial_state_json: must be a JSON object"),
    ("state violates schema", {"schema_json": '{"required": ["a"]}'}, INVALID, "'a' is a required property"),
]


@pytest.mark.parametrize(("fields", "code", "text"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
async def test_bad_create_is_refused(
    stub: pb_grpc.StateServiceStub, fields: dict, code: grpc.StatusCode, text: str
) -> None:
    await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="x"))
    request = {"execution_id": "y", **fields}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CreateExecution(pb.CreateExecutionRequest(**request))
    assert (caught.value.code(), text in caught.value.details()) == (code, True), caught.value.details()
    if request["execution_id"] == "y":
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetState(pb.GetStateRequest(execution_id="y"))
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND


async def test_reads_of_missing_things(stub: pb_grpc.StateServiceStub) -> None:
    await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="x"))
    cases = [
        (stub.GetState(pb.GetStateRequest(execution_id="x", at_revision=3)), grpc.StatusCode.OUT_OF_RANGE),
        (stub.GetHistory(pb.GetHistoryRequest(execution_id="x", page_token="garbage")), INVALID),
        (stub.GetHistory(pb.GetHistoryRequest(execution_id="nope")), grpc.StatusCode.NOT_FOUND),
        (stub.PublishObservation(pb.PublishObservationRequest(execution_id="x", to="")), INVALID),
    ]
    for call, code in cases:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == code
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.Watch(pb.WatchRequest(execution_id="nope")):
            pass
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
