"""The gRPC face of the engine: check the request, call the engine, map its error, fill the reply."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import grpc

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ..auth.guard import CALLER, Guard
from ..engine.config import EngineConfig
from ..engine.observations import GroupOptions
from ..engine.results import WatchProgress, WatchSnapshot
from ..engine.state_engine import StateEngine
from ..errors import NotOwnerError, StorageError
from ..metrics import NO_METRICS, Metrics
from ..storage.records import RevisionRecord, Right
from . import messages
from .forwarding import Forwarder, Rerouted
from .handlers import add_service
from .page_tokens import decode_page_token, encode_page_token
from .session import Session


def add_state_service(servicer: StateServicer, server: grpc.aio.Server, guard: Guard, metrics: Metrics) -> None:
    add_service(servicer, server, pb, "StateService", guard, metrics, servicer.forwarder)


class StateServicer(pb_grpc.StateServiceServicer):
    """Implements skillstate.state.v1.StateService over a StateEngine."""

    def __init__(
        self,
        engine: StateEngine,
        guard: Guard,
        config: EngineConfig,
        metrics: Metrics = NO_METRICS,
        forwarder: Forwarder | None = None,
    ) -> None:
        """With `forwarder` (replicas with leases), a call for an execution another replica owns goes there."""
        self._engine, self._guard, self._config, self._metrics = engine, guard, config, metrics
        self.forwarder = forwarder

    async def CreateExecution(self, request: pb.CreateExecutionRequest, context: Any) -> pb.CreateExecutionResponse:
        caller = CALLER.get()
        created = await self._engine.create_execution(
            request.execution_id,
            request.schema_json,
            request.initial_state_json,
            check_id=lambda chosen: caller.check(Right.ADMIN, chosen),
        )
        return pb.CreateExecutionResponse(
            execution_id=created.execution_id, revision=created.revision, state_hash=created.state_hash
        )

    async def GetState(self, request: pb.GetStateRequest, context: Any) -> pb.GetStateResponse:
        at = request.at_revision if request.HasField("at_revision") else None
        view = await self._engine.get_state(request.execution_id, at)
        return pb.GetStateResponse(revision=view.revision, state_json=view.state_json, state_hash=view.state_hash)

    async def SubmitPatch(self, request: pb.SubmitPatchRequest, context: Any) -> pb.SubmitPatchResponse:
        result = await self._engine.submit_patch(
            request.execution_id,
            request.agent_id,
            request.base_revision,
            request.patch_json,
            request.client_patch_id,
            request.action_json,
            CALLER.get().skills,
        )
        return messages.submit_response(result)

    async def Watch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[pb.WatchResponse]:
        # closed when the call ends, not when collected: the watch keeps its execution in memory until then
        async with contextlib.aclosing(self._engine.watch(request.execution_id, request.from_revision)) as items:
            async for item in items:
                if isinstance(item, WatchSnapshot):
                    snapshot = pb.Snapshot(
                        revision=item.revision, state_json=item.state_json, state_hash=item.state_hash
                    )
                    yield pb.WatchResponse(snapshot=snapshot, compact_revision=item.compact_revision)
                elif isinstance(item, WatchProgress):
                    yield pb.WatchResponse(progress=pb.Progress(head_revision=item.head_revision))
                else:
                    yield _watch_event(item)

    async def GetHistory(self, request: pb.GetHistoryRequest, context: Any) -> pb.GetHistoryResponse:
        execution_id, token = request.execution_id, request.page_token
        after = decode_page_token(token, execution_id, "GetHistory", int) if token else None
        page = await self._engine.history(
            execution_id, request.from_revision, request.to_revision, request.page_size, after
        )
        return pb.GetHistoryResponse(
            revisions=[messages.revision_event(r) for r in page.revisions],
            next_page_token=encode_page_token(execution_id, page.revisions[-1].revision) if page.more else "",
            head_revision=page.head_revision,
            compact_revision=page.compact_revision,
        )

    async def Compact(self, request: pb.CompactRequest, context: Any) -> pb.CompactResponse:
        compacted = await self._engine.compact(request.execution_id, request.up_to_revision)
        return pb.CompactResponse(compact_revision=compacted)

    async def PublishObservation(
        self, request: pb.PublishObservationRequest, context: Any
    ) -> pb.PublishObservationResponse:
        sequence = await self._engine.publish_observation(
            request.execution_id, request.to, request.source, request.kind, request.payload_json
        )
        return pb.PublishObservationResponse(sequence=sequence)

    async def StreamObservations(
        self, request: pb.StreamObservationsRequest, context: Any
    ) -> AsyncIterator[pb.StreamObservationsResponse]:
        if request.group:
            options = GroupOptions(request.group, request.ack_deadline_ms, request.max_unacked)
            members = self._engine.group_observations(
                request.execution_id, request.agent_id, list(request.skills), request.after_sequence, options
            )
            async with contextlib.aclosing(members) as delivered:  # leaving the group is not left to the GC
                async for observation, delivery in delivered:
                    yield pb.StreamObservationsResponse(observation=messages.observation(observation, delivery))
            return
        stream = self._engine.observations(
            request.execution_id, request.agent_id, list(request.skills), request.after_sequence
        )
        async with contextlib.aclosing(stream) as observations:
            async for observation in observations:
                yield pb.StreamObservationsResponse(observation=messages.observation(observation))

    async def Session(
        self, requests: AsyncIterator[pb.SessionRequest], context: Any
    ) -> AsyncIterator[pb.SessionResponse]:
        first = await anext(aiter(requests), None)
        try:
            session = await Session.open(
                self._engine, self._guard, self._config, self._metrics, CALLER.get(), context.peer(), first
            )
        except NotOwnerError as e:
            if self.forwarder is None or self.forwarder.forwarded(context):
                raise
            try:
                forwarded = await self.forwarder.bidi(
                    e.owner_address, SESSION_PATH, _chained(first, requests), pb.SessionResponse, context
                )
            except Rerouted:  # the requests read are gone with the call: the client reopens the session
                raise StorageError(f"the owner of execution {e.execution_id!r} cannot be reached: reopen") from e
            async for message in forwarded:
                yield message
            return
        async with contextlib.aclosing(session.responses(requests)) as responses:  # its tasks end with the call
            async for message in responses:
                yield message

    async def ListExecutions(self, request: pb.ListExecutionsRequest, context: Any) -> pb.ListExecutionsResponse:
        owner = f"executions:{request.prefix}"
        after = decode_page_token(request.page_token, owner, "ListExecutions", str) if request.page_token else None
        page = await self._engine.list_executions(request.prefix, request.page_size, after)
        caller = CALLER.get()
        return pb.ListExecutionsResponse(
            executions=[
                messages.execution_summary(summary)
                for summary in page.executions
                if caller.may(Right.READ, summary.execution_id)
            ],
            next_page_token=encode_page_token(owner, page.executions[-1].execution_id) if page.more else "",
        )

    async def DeleteExecution(self, request: pb.DeleteExecutionRequest, context: Any) -> pb.DeleteExecutionResponse:
        return pb.DeleteExecutionResponse(head_revision=await self._engine.delete_execution(request.execution_id))

    async def AckObservations(self, request: pb.AckObservationsRequest, context: Any) -> pb.AckObservationsResponse:
        done = await self._engine.ack_observations(
            request.execution_id, request.group, request.agent_id, list(request.sequences), request.requeue
        )
        return pb.AckObservationsResponse(acknowledged=done)


SESSION_PATH = f"/{pb.DESCRIPTOR.services_by_name['StateService'].full_name}/Session"


async def _chained(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for request in rest:
        yield request


@functools.lru_cache(maxsize=4096)
def _watch_event(record: RevisionRecord) -> pb.WatchResponse:
    """One message per revision, shared by every watcher that streams it (it is never mutated)."""
    return pb.WatchResponse(event=messages.revision_event(record))
