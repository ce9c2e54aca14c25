"""The gRPC face of the engine: check the request, call the engine, map its error, fill the reply."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from .engine import StateEngine
from .errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    CorruptLogError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    StateError,
    StorageError,
    WatcherTooSlowError,
)
from .merge import Resolution, decode_resolutions
from .policy import MergePolicy
from .results import WatchSnapshot
from .storage.records import ObservationRecord, RevisionRecord

STATUS_BY_ERROR: dict[type[StateError], grpc.StatusCode] = {
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    ConflictError: grpc.StatusCode.ABORTED,
    BaseAheadError: grpc.StatusCode.FAILED_PRECONDITION,
    OutOfRangeError: grpc.StatusCode.OUT_OF_RANGE,
    WatcherTooSlowError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    StorageError: grpc.StatusCode.UNAVAILABLE,
    CorruptLogError: grpc.StatusCode.DATA_LOSS,
}


def status_of(error: StateError) -> grpc.StatusCode:
    """The status for an engine error: its class's entry, else its nearest ancestor's."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return grpc.StatusCode.INTERNAL


R = TypeVar("R")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request the protobuf runtime refused (for example a string field that is not UTF-8)."""

    message_type: str
    reason: str

    def error(self) -> InvalidArgumentError:
        return InvalidArgumentError(f"request is not a valid {self.message_type}: {self.reason}")


def _unary(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    @functools.wraps(method)
    async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            if isinstance(request, Undecodable):
                raise request.error()
            return await method(self, request, context)
        except StateError as e:
            await context.abort(status_of(e), str(e))
            raise  # unreachable: abort raises
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__} (logged by the server)")
            raise

    return handler


def _stream(method: Callable[..., AsyncIterator[R]]) -> Callable[..., AsyncIterator[R]]:
    @functools.wraps(method)
    async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[R]:
        try:
            if isinstance(request, Undecodable):
                raise request.error()
            async for message in method(self, request, context):
                yield message
        except StateError as e:
            await context.abort(status_of(e), str(e))
        except Exception:
            log.exception("%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method.__name__} (logged by the server)")

    return handler


def _lenient_parser(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except DecodeError as e:
            return Undecodable(message_class.DESCRIPTOR.name, str(e).rsplit(": ", 1)[-1])

    return parse


def add_state_service(servicer: StateServicer, server: grpc.aio.Server) -> None:
    """Register the servicer like the generated add_StateServiceServicer_to_server, except that a request
    that fails to decode reaches the servicer as Undecodable and is answered INVALID_ARGUMENT, not UNKNOWN."""
    service = pb.DESCRIPTOR.services_by_name["StateService"]
    handlers = {}
    for method in service.methods:
        make = grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=_lenient_parser(getattr(pb, method.input_type.name)),
            response_serializer=getattr(pb, method.output_type.name).SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


class StateServicer(pb_grpc.StateServiceServicer):
    """Implements skillstate.state.v1.StateService over a StateEngine."""

    def __init__(self, engine: StateEngine) -> None:
        self._engine = engine

    @_unary
    async def CreateExecution(self, request: pb.CreateExecutionRequest, context: Any) -> pb.CreateExecutionResponse:
        created = await self._engine.create_execution(
            request.execution_id, request.schema_json, request.initial_state_json
        )
        return pb.CreateExecutionResponse(
            execution_id=created.execution_id, revision=created.revision, state_hash=created.state_hash
        )

    @_unary
    async def GetState(self, request: pb.GetStateRequest, context: Any) -> pb.GetStateResponse:
        at = request.at_revision if request.HasField("at_revision") else None
        view = await self._engine.get_state(request.execution_id, at)
        return pb.GetStateResponse(revision=view.revision, state_json=view.state_json, state_hash=view.state_hash)

    @_unary
    async def SubmitPatch(self, request: pb.SubmitPatchRequest, context: Any) -> pb.SubmitPatchResponse:
        result = await self._engine.submit_patch(
            request.execution_id,
            request.agent_id,
            request.base_revision,
            request.patch_json,
            request.client_patch_id,
            request.action_json,
        )
        return pb.SubmitPatchResponse(
            revision=result.revision,
            state_hash=result.state_hash,
            applied_patch_json=result.applied_patch_json,
            resolutions=[_resolution(r) for r in result.resolutions],
            duplicate=result.duplicate,
        )

    @_stream
    async def Watch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[pb.WatchResponse]:
        async for item in self._engine.watch(request.execution_id, request.from_revision):
            if isinstance(item, WatchSnapshot):
                snapshot = pb.Snapshot(revision=item.revision, state_json=item.state_json, state_hash=item.state_hash)
                yield pb.WatchResponse(snapshot=snapshot, compact_revision=item.compact_revision)
            else:
                yield _watch_event(item)

    @_unary
    async def GetHistory(self, request: pb.GetHistoryRequest, context: Any) -> pb.GetHistoryResponse:
        page = await self._engine.history(
            request.execution_id, request.from_revision, request.to_revision, request.page_size, request.page_token
        )
        return pb.GetHistoryResponse(
            revisions=[revision_event(r) for r in page.revisions],
            next_page_token=page.next_page_token,
            head_revision=page.head_revision,
            compact_revision=page.compact_revision,
        )

    @_unary
    async def Compact(self, request: pb.CompactRequest, context: Any) -> pb.CompactResponse:
        compacted = await self._engine.compact(request.execution_id, request.up_to_revision)
        return pb.CompactResponse(compact_revision=compacted)

    @_unary
    async def PublishObservation(
        self, request: pb.PublishObservationRequest, context: Any
    ) -> pb.PublishObservationResponse:
        sequence = await self._engine.publish_observation(
            request.execution_id, request.to, request.source, request.kind, request.payload_json
        )
        return pb.PublishObservationResponse(sequence=sequence)

    @_stream
    async def StreamObservations(
        self, request: pb.StreamObservationsRequest, context: Any
    ) -> AsyncIterator[pb.StreamObservationsResponse]:
        stream = self._engine.observations(
            request.execution_id, request.agent_id, list(request.skills), request.after_sequence
        )
        async for observation in stream:
            yield pb.StreamObservationsResponse(observation=_observation(observation))


_POLICY = {policy: pb.MergePolicy.Value(f"MERGE_POLICY_{policy.name}") for policy in MergePolicy}


def _resolution(resolution: Resolution) -> pb.Resolution:
    return pb.Resolution(
        path=resolution.path,
        policy=_POLICY[resolution.policy],
        outcome=pb.ResolutionOutcome.Value(f"RESOLUTION_OUTCOME_{resolution.outcome}"),
    )


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def revision_event(record: RevisionRecord) -> pb.RevisionEvent:
    return pb.RevisionEvent(
        revision=record.revision,
        agent_id=record.agent_id,
        base_revision=record.base_revision,
        applied_patch_json=record.applied_patch_json,
        action_json=record.action_json,
        state_hash=record.state_hash,
        commit_time=_timestamp(record.committed_at),
        client_patch_id=record.client_patch_id,
        resolutions=[_resolution(r) for r in decode_resolutions(record.resolutions_json)],
    )


@functools.lru_cache(maxsize=4096)
def _watch_event(record: RevisionRecord) -> pb.WatchResponse:
    """One message per revision, shared by every watcher that streams it (it is never mutated)."""
    return pb.WatchResponse(event=revision_event(record))


def _observation(record: ObservationRecord) -> pb.Observation:
    return pb.Observation(
        sequence=record.sequence,
        to=record.to,
        source=record.source,
        kind=record.kind,
        payload_json=record.payload_json,
        publish_time=_timestamp(record.published_at),
    )
