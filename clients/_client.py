"""The async client of the state server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import grpc

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ._channel import ClientTLS, open_channel
from ._errors import SkillstateError
from ._owners import Owners
from ._retry import RetryPolicy
from ._rpc import RpcClient
from ._session import Session
from ._types import (
    JSON,
    CreatedExecution,
    ExecutionPage,
    ExecutionSummary,
    HistoryPage,
    Observation,
    PatchResult,
    RevisionEvent,
    Snapshot,
    State,
    StateJSON,
)
from ._wire import dumps_json, patch_request


class StateClient(RpcClient):
    """Talks to one state server. Use as `async with StateClient("host:port") as client: ...`.

    Replicas on one PostgreSQL database forward a call for an execution to the replica that owns it. With
    `follow_owners`, the client is redirected instead: it learns each execution's owner (at the address the
    owner advertises, reached with the same token and TLS) and calls it directly, a hop less per call; an
    owner that cannot be reached is forgotten, and the client's own target asked again.
    """

    _stub_class = pb_grpc.StateServiceStub

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        tls: ClientTLS | None = None,
        channel: grpc.aio.Channel | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float | None = 30.0,
        follow_owners: bool = False,
    ) -> None:
        if follow_owners and channel is not None:
            raise ValueError("follow_owners: give target, token and tls (owners are called on channels of their own)")
        super().__init__(target, token=token, tls=tls, channel=channel, retry=retry, timeout=timeout)
        if follow_owners:

            def owner_stub(address: str) -> tuple[Any, grpc.aio.Channel]:
                channel = open_channel(address, token=token, tls=tls)
                stub: Any = type(self._stub)(channel)
                return stub, channel

            self._owners = Owners(self._stub, owner_stub)

    async def create_execution(
        self,
        execution_id: str = "",
        *,
        schema: Mapping[str, JSON] | None = None,
        initial_state: Mapping[str, JSON] | None = None,
    ) -> CreatedExecution:
        """Create an execution; an empty id lets the server choose one."""
        request = pb.CreateExecutionRequest(
            execution_id=execution_id,
            schema_json=dumps_json(schema) if schema is not None else "",
            initial_state_json=dumps_json(initial_state) if initial_state is not None else "",
        )
        reply = await self._call("CreateExecution", request, retry=False)
        return CreatedExecution(reply.execution_id, reply.revision, reply.state_hash)

    async def get_state(self, execution_id: str, at_revision: int | None = None) -> State:
        """The state at head, or at a committed revision."""
        request = pb.GetStateRequest(execution_id=execution_id, at_revision=at_revision)
        reply = await self._call("GetState", request)
        return State(reply.revision, json.loads(reply.state_json), reply.state_hash)

    async def get_state_json(self, execution_id: str, at_revision: int | None = None) -> StateJSON:
        """get_state without decoding the state: decoding a 4 MiB state of small values holds the event loop
        some 50 ms, which a proxy passing the text on (the web console) need not spend."""
        request = pb.GetStateRequest(execution_id=execution_id, at_revision=at_revision)
        reply = await self._call("GetState", request)
        return StateJSON(reply.revision, reply.state_json, reply.state_hash)

    async def submit_patch(
        self,
        execution_id: str,
        patch: Mapping[str, JSON],
        *,
        agent_id: str,
        base_revision: int,
        action: JSON = None,
        client_patch_id: str | None = None,
    ) -> PatchResult:
        """Submit a merge patch computed against base_revision.

        A client_patch_id is generated when none is given, so that retries after UNAVAILABLE can never
        apply the patch twice. Raises ConflictError when the patch overlaps a concurrent change under
        the `reject` policy: re-read the state and submit again.
        """
        request = patch_request(patch, base_revision, action, client_patch_id, execution_id, agent_id)
        return PatchResult.from_pb(await self._call("SubmitPatch", request))

    async def get_history(
        self,
        execution_id: str,
        from_revision: int = 1,
        to_revision: int = 0,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> HistoryPage:
        """One page of the audit trail."""
        request = pb.GetHistoryRequest(
            execution_id=execution_id,
            from_revision=from_revision,
            to_revision=to_revision,
            page_size=page_size,
            page_token=page_token,
        )
        reply = await self._call("GetHistory", request)
        events = [RevisionEvent.from_pb(r) for r in reply.revisions]
        return HistoryPage(events, reply.next_page_token, reply.head_revision, reply.compact_revision)

    async def history(
        self, execution_id: str, from_revision: int = 1, to_revision: int = 0, *, page_size: int = 0
    ) -> AsyncIterator[RevisionEvent]:
        """Every revision in the range, fetching page after page."""
        token = ""
        while True:
            page = await self.get_history(
                execution_id, from_revision, to_revision, page_size=page_size, page_token=token
            )
            for event in page.revisions:
                yield event
            token = page.next_page_token
            if not token:
                return

    async def watch(
        self, execution_id: str, from_revision: int = 0, *, resume: bool = True
    ) -> AsyncIterator[RevisionEvent | Snapshot]:
        """Every revision after from_revision, in order, exactly once, then live ones.

        With resume (the default), a cut stream (UNAVAILABLE, or RESOURCE_EXHAUSTED for a watcher that
        fell behind) is reopened from the last revision received, so no revision is missed or repeated. The
        server's progress messages (sent while nothing happens) are not yielded.
        """

        def open_stream(cursor: int) -> tuple[Any, Any, Any]:
            request = pb.WatchRequest(execution_id=execution_id, from_revision=cursor)
            stub, metadata = self._route(request)
            return request, stub, stub.Watch(request, metadata=metadata)

        def decode(message: pb.WatchResponse) -> tuple[int, RevisionEvent | Snapshot] | None:
            kind = message.WhichOneof("kind")
            if kind == "snapshot":
                s = message.snapshot
                return s.revision, Snapshot(
                    s.revision, json.loads(s.state_json), s.state_hash, message.compact_revision
                )
            if kind == "event":
                return message.event.revision, RevisionEvent.from_pb(message.event)
            return None  # progress (or a kind newer than this client): the cursor stays where it is

        async for item in self._resumable(open_stream, decode, from_revision, resume):
            yield item

    async def list_executions(self, prefix: str = "", *, page_size: int = 0, page_token: str = "") -> ExecutionPage:
        """One page of the executions the caller may read whose id starts with `prefix`, by id."""
        request = pb.ListExecutionsRequest(prefix=prefix, page_size=page_size, page_token=page_token)
        reply = await self._call("ListExecutions", request)
        return ExecutionPage([ExecutionSummary.from_pb(e) for e in reply.executions], reply.next_page_token)

    async def executions(self, prefix: str = "", *, page_size: int = 0) -> AsyncIterator[ExecutionSummary]:
        """Every execution the caller may read whose id starts with `prefix`, by id, fetching page after page."""
        token = ""
        while True:
            page = await self.list_executions(prefix, page_size=page_size, page_token=token)
            for summary in page.executions:
                yield summary
            token = page.next_page_token
            if not token:
                return

    async def delete_execution(self, execution_id: str) -> int:
        """Remove an execution whole; returns its head revision then. An operator's call (the admin right):
        it cannot be undone. Its open watches and streams end NOT_FOUND; the id may be created again."""
        request = pb.DeleteExecutionRequest(execution_id=execution_id)
        # not retried: after a lost answer, a retry would say NOT_FOUND, or delete one created again since
        reply: pb.DeleteExecutionResponse = await self._call("DeleteExecution", request, retry=False)
        return reply.head_revision

    async def compact(self, execution_id: str, up_to_revision: int) -> int:
        """Drop history up to the newest snapshot at or before up_to_revision; returns the compact revision.

        An operator's call: the dropped revisions cannot be read again (reads of them are OUT_OF_RANGE, a
        watch from before them starts with the snapshot). Compacting to the same point again changes nothing.
        """
        request = pb.CompactRequest(execution_id=execution_id, up_to_revision=up_to_revision)
        reply: pb.CompactResponse = await self._call("Compact", request)
        return reply.compact_revision

    async def publish_observation(
        self, execution_id: str, to: str, payload: JSON, *, source: str = "", kind: str = ""
    ) -> int:
        """Store an observation for an agent id, `skill:NAME` or `*`; returns its sequence number."""
        request = pb.PublishObservationRequest(
            execution_id=execution_id, to=to, source=source, kind=kind, payload_json=dumps_json(payload)
        )
        reply: pb.PublishObservationResponse = await self._call("PublishObservation", request, retry=False)
        return int(reply.sequence)

    async def observations(
        self,
        execution_id: str,
        agent_id: str,
        *,
        skills: Sequence[str] = (),
        after_sequence: int = 0,
        resume: bool = True,
        group: str = "",
        ack_deadline: float | None = None,
        max_unacked: int = 0,
    ) -> AsyncIterator[Observation]:
        """Observations addressed to agent_id, its skills or everyone, resuming after a cut like watch.

        With `group`, the stream joins that consumer group: the observations for the skills (or everyone)
        are shared among the group's members, each delivered to one of them (`Observation.delivery` counts
        how often) until acknowledged with `ack_observations`, and delivered again to a member if its holder's
        stream ends or `ack_deadline` seconds pass first (the first member's choice holds for the group; None:
        the server's default). A member holds at most `max_unacked` unacknowledged (0: one). A reopened stream
        resumes the agent's own observations after the last one received; the group keeps the rest.
        """
        resumed = [after_sequence]  # the agent's own observations: a group's deliveries do not move it

        def open_stream(cursor: int) -> tuple[Any, Any, Any]:
            request = pb.StreamObservationsRequest(
                execution_id=execution_id,
                agent_id=agent_id,
                skills=list(skills),
                after_sequence=cursor,
                group=group,
                ack_deadline_ms=round(ack_deadline * 1000) if ack_deadline is not None else 0,
                max_unacked=max_unacked,
            )
            stub, metadata = self._route(request)
            return request, stub, stub.StreamObservations(request, metadata=metadata)

        def decode(message: pb.StreamObservationsResponse) -> tuple[int, Observation]:
            if not message.observation.delivery:
                resumed[0] = message.observation.sequence
            return resumed[0], Observation.from_pb(message.observation)

        async for item in self._resumable(open_stream, decode, after_sequence, resume):
            yield item

    async def ack_observations(
        self, execution_id: str, group: str, sequences: Sequence[int], *, agent_id: str, requeue: bool = False
    ) -> int:
        """Tell consumer group `group` that its member `agent_id` handled the observations `sequences`, so
        that none is delivered again; with `requeue`, that it did not handle them after all, so that the group
        delivers them again at once, to another member if one is free. Returns how many that member held
        unacknowledged (repeating an ack is harmless)."""
        request = pb.AckObservationsRequest(
            execution_id=execution_id, group=group, sequences=list(sequences), requeue=requeue, agent_id=agent_id
        )
        reply: pb.AckObservationsResponse = await self._call("AckObservations", request)
        return int(reply.acknowledged)

    def session(
        self,
        execution_id: str,
        *,
        agent_id: str,
        skills: Sequence[str] = (),
        after_sequence: int = 0,
        group: str = "",
        ack_deadline: float | None = None,
        max_unacked: int = 0,
        from_revision: int | None = None,
        receive_observations: bool = True,
    ) -> Session:
        """One long-lived stream for an agent: `async with client.session(execution_id, agent_id=...) as s:`,
        then `await s.submit(patch, base_revision=...)` (many may be outstanding; each returns once durable)
        and `async for observation in s.observations()`. The observation arguments mean what they mean in
        `observations`; with `from_revision`, `s.revisions()` streams revisions as `watch` does. An agent that
        only writes passes `receive_observations=False` (observations not read pile up, up to a limit that
        ends the session). A cut stream is reopened: unanswered submits are sent again under their
        idempotency keys."""

        def route(opening: pb.SessionOpen) -> tuple[Any, Any, Callable[[SkillstateError], bool]]:
            stub, metadata = self._route(opening)
            return stub, metadata, lambda error: self._followed(opening, error, stub)

        return Session(
            route,
            self._retry,
            execution_id,
            agent_id,
            skills=skills,
            after_sequence=after_sequence,
            group=group,
            ack_deadline=ack_deadline,
            max_unacked=max_unacked,
            from_revision=from_revision,
            receive_observations=receive_observations,
        )
