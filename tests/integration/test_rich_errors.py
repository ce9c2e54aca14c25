"""Refusals carry google.rpc.Status details (ErrorInfo, BadRequest) in the `grpc-status-details-bin` trailer,
with the same code and message as before, and the SDK exposes them as typed attributes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from skillstate.clients import (
    ConflictError,
    NotFoundError,
    OutOfRangeError,
    PreconditionError,
    SkillstateError,
    StateClient,
    ValidationError,
)
from skillstate.clients._errors import from_rpc_error, from_status
from skillstate.server.rpc.app import RunningServer
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "integer"}, "x,y": {}}}


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.StateServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.StateServiceStub(channel)


async def execution_at_revision_1(client: StateClient) -> str:
    created = await client.create_execution(schema=SCHEMA, initial_state={"n": 0, "m": 0, "x,y": 0})
    await client.submit_patch(created.execution_id, {"n": 1, "m": 1, "x,y": 1}, agent_id="a", base_revision=0)
    return created.execution_id


def details(error: grpc.aio.AioRpcError) -> tuple[status_pb2.Status, dict[str, object]]:
    """The trailer's status (rpc_status checks its code and message equal the call's) and its unpacked
    details by type name."""
    status = rpc_status.from_call(error)
    assert status is not None, "no grpc-status-details-bin trailer"
    unpacked: dict[str, object] = {}
    for detail in status.details:
        for message_type in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest):
            if detail.Is(message_type.DESCRIPTOR):
                unpacked[message_type.DESCRIPTOR.name] = message = message_type()
                detail.Unpack(message)
    return status, unpacked


def fields_of(found: dict[str, object]) -> list[tuple[str, str]]:
    bad_request = found["BadRequest"]
    assert isinstance(bad_request, error_details_pb2.BadRequest)
    return [(v.field, v.description) for v in bad_request.field_violations]


async def test_a_conflict_arrives_with_its_paths_and_head_revision(client: StateClient) -> None:
    execution_id = await execution_at_revision_1(client)
    with pytest.raises(ConflictError) as caught:
        await client.submit_patch(execution_id, {"n": 5, "x,y": 5}, agent_id="b", base_revision=0)
    error = caught.value
    assert (error.reason, error.paths, error.head_revision) == ("CONFLICT", ["/n", "/x,y"], 1)
    assert error.metadata == {"paths": '["/n","/x,y"]', "head_revision": "1"}
    assert error.message == "conflict at /n, /x,y (policy reject); head is revision 1: re-read the state and retry"
    assert error.field_violations == []


async def test_a_conflict_through_a_raw_stub(client: StateClient, stub: pb_grpc.StateServiceStub) -> None:
    execution_id = await execution_at_revision_1(client)
    request = pb.SubmitPatchRequest(execution_id=execution_id, agent_id="b", base_revision=0, patch_json='{"m": 7}')
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SubmitPatch(request)
    assert caught.value.code() == grpc.StatusCode.ABORTED
    assert caught.value.details() == "conflict at /m (policy reject); head is revision 1: re-read the state and retry"
    status, found = details(caught.value)
    assert status.code == grpc.StatusCode.ABORTED.value[0]
    assert status.message == caught.value.details()
    info = found["ErrorInfo"]
    assert isinstance(info, error_details_pb2.ErrorInfo)
    assert (info.reason, info.domain) == ("CONFLICT", "skillstate.dev")
    assert json.loads(info.metadata["paths"]) == ["/m"]
    assert info.metadata["head_revision"] == "1"
    assert "BadRequest" not in found


async def test_a_schema_violation_names_the_path_in_the_state(
    client: StateClient, stub: pb_grpc.StateServiceStub
) -> None:
    execution_id = await execution_at_revision_1(client)
    with pytest.raises(ValidationError) as caught:
        await client.submit_patch(execution_id, {"n": "seven", "m": "eight"}, agent_id="a", base_revision=1)
    assert caught.value.reason == "SCHEMA_VIOLATION"
    assert caught.value.field_violations == [
        ("/m", "'eight' is not of type 'integer' (type)"),
        ("/n", "'seven' is not of type 'integer' (type)"),
    ]
    request = pb.SubmitPatchRequest(execution_id=execution_id, agent_id="a", base_revision=1, patch_json='{"n": "x"}')
    with pytest.raises(grpc.aio.AioRpcError) as raw:
        await stub.SubmitPatch(request)
    assert raw.value.details() == "schema violation: /n: 'x' is not of type 'integer' (type)"
    _, found = details(raw.value)
    assert fields_of(found) == [("/n", "'x' is not of type 'integer' (type)")]
    info = found["ErrorInfo"]
    assert isinstance(info, error_details_pb2.ErrorInfo) and info.reason == "SCHEMA_VIOLATION"


@pytest.mark.parametrize(
    ("fields", "violation"),
    [
        ({"agent_id": ""}, ("agent_id", "must not be empty")),  # the raiser names the field
        ({"patch_json": "[1]"}, ("patch_json", "must be a JSON object, got array")),
        ({"base_revision": -1}, ("base_revision", "must be >= 0, got -1")),  # read from the message
        ({"agent_id": "a\nb"}, ("agent_id", "must not contain control characters")),
    ],
    ids=["empty agent_id", "patch_json", "base_revision", "control agent_id"],
)
async def test_a_bad_field_is_a_field_violation(
    client: StateClient, stub: pb_grpc.StateServiceStub, fields: dict[str, object], violation: tuple[str, str]
) -> None:
    execution_id = await execution_at_revision_1(client)
    request = {"execution_id": execution_id, "agent_id": "a", "base_revision": 1, "patch_json": '{"n": 2}', **fields}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.SubmitPatch(pb.SubmitPatchRequest(**request))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == f"{violation[0]}: {violation[1]}"
    _, found = details(caught.value)
    assert fields_of(found) == [violation]
    error = from_rpc_error(caught.value)
    assert isinstance(error, ValidationError)
    assert (error.reason, error.field_violations) == ("INVALID_ARGUMENT", [violation])


async def test_a_bad_create_names_its_field(client: StateClient) -> None:
    with pytest.raises(ValidationError) as bad_id:
        await client.create_execution("has space")
    assert bad_id.value.field_violations == [
        ("execution_id", "must be 1-128 characters of A-Z a-z 0-9 . _ : -, got 'has space'")
    ]
    with pytest.raises(ValidationError) as bad_policy:
        await client.create_execution(schema={"properties": {"a": {"x-merge": "sum"}}})
    [(field, description)] = bad_policy.value.field_violations
    assert (field, description.startswith("/properties/a: x-merge must be one of ")) == ("schema_json", True)


async def test_a_message_naming_no_field_has_no_bad_request(server: RunningServer, client: StateClient) -> None:
    execution_id = await execution_at_revision_1(client)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        raw = channel.unary_unary("/skillstate.state.v1.StateService/SubmitPatch", request_serializer=lambda b: b)
        request = pb.SubmitPatchRequest(execution_id=execution_id, agent_id="a").SerializeToString()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await raw(request + b"\x22\x03\xff\xfe{")  # patch_json: three bytes that are not UTF-8
    assert caught.value.details().startswith("request is not a valid SubmitPatchRequest: ")
    _, found = details(caught.value)
    assert "BadRequest" not in found
    error = from_rpc_error(caught.value)
    assert (type(error), error.reason, error.field_violations) == (ValidationError, "INVALID_ARGUMENT", [])


async def test_not_found_has_its_reason(client: StateClient, stub: pb_grpc.StateServiceStub) -> None:
    with pytest.raises(NotFoundError) as caught:
        await client.get_state("nope")
    assert (caught.value.reason, caught.value.metadata, caught.value.message) == (
        "NOT_FOUND",
        {},
        "execution 'nope' not found",
    )
    with pytest.raises(grpc.aio.AioRpcError) as raw:
        await stub.GetState(pb.GetStateRequest(execution_id="nope"))
    _, found = details(raw.value)
    info = found["ErrorInfo"]
    assert isinstance(info, error_details_pb2.ErrorInfo)
    assert (info.reason, info.domain, dict(info.metadata)) == ("NOT_FOUND", "skillstate.dev", {})


async def test_revisions_arrive_structured(client: StateClient) -> None:
    execution_id = await execution_at_revision_1(client)
    with pytest.raises(PreconditionError) as ahead:
        await client.submit_patch(execution_id, {"n": 2}, agent_id="a", base_revision=99)
    assert (ahead.value.reason, ahead.value.base_revision, ahead.value.head_revision) == ("BASE_AHEAD", 99, 1)
    assert ahead.value.message == "base_revision: 99 is ahead of the head revision 1"
    with pytest.raises(OutOfRangeError) as out:
        await client.get_state(execution_id, at_revision=5)
    assert (out.value.reason, out.value.revision, out.value.head_revision) == ("OUT_OF_RANGE", 5, 1)
    assert out.value.oldest_revision is None


async def test_from_status_and_from_rpc_error_agree(client: StateClient, stub: pb_grpc.StateServiceStub) -> None:
    execution_id = await execution_at_revision_1(client)
    requests = [
        pb.SubmitPatchRequest(execution_id=execution_id, agent_id="b", base_revision=0, patch_json='{"n": 3}'),
        pb.SubmitPatchRequest(execution_id=execution_id, agent_id="b", base_revision=1, patch_json='{"n": "x"}'),
        pb.SubmitPatchRequest(execution_id=execution_id, agent_id="", base_revision=1, patch_json="{}"),
        pb.SubmitPatchRequest(execution_id=execution_id, agent_id="b", base_revision=9, patch_json="{}"),
        pb.SubmitPatchRequest(execution_id="nope", agent_id="b", base_revision=0, patch_json="{}"),
    ]
    for request in requests:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SubmitPatch(request)
        status, _ = details(caught.value)
        by_call, by_status = from_rpc_error(caught.value), from_status(status)
        assert by_call.reason is not None
        assert summary(by_call) == summary(by_status)


def summary(error: SkillstateError) -> tuple[object, ...]:
    return (type(error), error.status, error.message, error.reason, error.metadata, error.field_violations)


async def test_an_error_without_details_has_empty_attributes(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        missing = channel.unary_unary("/skillstate.state.v1.StateService/NoSuchMethod", request_serializer=lambda b: b)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await missing(b"")
    assert rpc_status.from_call(caught.value) is None  # gRPC's own status: no trailer
    error = from_rpc_error(caught.value)
    assert error.status == grpc.StatusCode.UNIMPLEMENTED
    assert (error.reason, error.metadata, error.field_violations) == (None, {}, [])
    conflict = from_status(status_pb2.Status(code=grpc.StatusCode.ABORTED.value[0], message="conflict"))
    assert isinstance(conflict, ConflictError)
    assert (conflict.reason, conflict.paths, conflict.head_revision) == (None, [], None)
