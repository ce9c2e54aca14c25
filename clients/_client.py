"""The async client of the state server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import grpc

from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ._errors import SkillstateError, UnavailableError, from_rpc_error
from ._owners import MAX_REDIRECTS, Owners
from ._retry import Reopenings, RetryPolicy
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

T = TypeVar("T")

_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
_CHANNEL_OPTIONS = [
    # gRPC waits 1 s and more before reconnecting by default, longer than a retry policy should need to
    # notice that a restarted server is back
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # keepalive within the server's policy (server/rpc/app.py KEEPALIVE_OPTIONS: pings at most every 10 s
    # while it sends nothing, else GOAWAY "too_many_pings"): a dead server or a half-open connection under an
    # open stream is noticed within 30 + 10 s instead of never
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),  # an idle channel sends nothing: the server pings it
    ("grpc.http2.max_pings_without_data", 0),  # a watch sends no data after its request: keep pinging
]


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """TLS for the channel: the CA that signed the server's certificate (None: the system's roots), and for
    mutual TLS this client's own certificate chain and key. All PEM."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None

    @classmethod
    def from_files(
        cls, ca: str | Path | None = None, cert: str | Path | None = None, key: str | Path | None = None
    ) -> ClientTLS:
        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return cls(read(ca), read(cert), read(key))


def _with_metadata(details: Any, header: tuple[str, str]) -> Any:
    return details._replace(metadata=(*(details.metadata or ()), header))


class _TokenOnUnaryCalls(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), request)


class _TokenOnStreams(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), request)


class _TokenOnSessions(grpc.aio.StreamStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_metadata(details, self._header), requests)


def open_channel(
    target: str,
    *,
    token: str | None = None,
    tls: ClientTLS | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """A channel to a skillstate server, with a bearer token on every call and TLS if given; clients of
    several services may share it (`StateClient(channel=...)`). `options` are gRPC channel options that
    replace the defaults of the same name (keepalive: docs/limits.md; pinging more often than every 10 s
    gets the connection closed by the server)."""
    header = ("authorization", f"Bearer {token}")
    interceptors = [_TokenOnUnaryCalls(header), _TokenOnStreams(header), _TokenOnSessions(header)] if token else None
    channel_options = list({**dict(_CHANNEL_OPTIONS), **dict(options)}.items())
    if tls is None:
        return grpc.aio.insecure_channel(target, options=channel_options, interceptors=interceptors)
    credentials = grpc.ssl_channel_credentials(tls.root_certificates, tls.private_key, tls.certificate_chain)
    return grpc.aio.secure_channel(target, credentials, options=channel_options, interceptors=interceptors)


class RpcClient:
    """A channel to a skillstate server, the service's stub, and the retry loop its calls share.

    A subclass names its generated stub class in `_stub_class`. `token` is sent on every call, `tls`
    encrypts the channel. Pass `channel` (see `open_channel`) to share one channel between clients of several
    services (the caller then closes it).
    """

    _stub_class: Any

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        tls: ClientTLS | None = None,
        channel: grpc.aio.Channel | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float | None = 30.0,
    ) -> None:
        self._channel = channel if channel is not None else open_channel(target, token=token, tls=tls)
        self._owns_channel = channel is None
        self._stub: Any = self._stub_class(self._channel)
        self._retry = retry
        self._timeout = timeout
        self._owners: Owners | None = None

    def _route(self, request: Any) -> tuple[Any, Sequence[tuple[str, str]] | None]:
        """The stub to send `request` to, and the metadata to send with it: for a client that follows owners,
        its execution's owner's when known (owners.py)."""
        execution_id = getattr(request, "execution_id", "")
        if self._owners is None or not execution_id:
            return self._stub, None
        return self._owners.route(execution_id)

    def _followed(self, request: Any, error: SkillstateError, stub: Any) -> bool:
        """Whether the failed call should go at once to the owner the error names."""
        execution_id = getattr(request, "execution_id", "")
        return self._owners is not None and bool(execution_id) and self._owners.learn(execution_id, error, stub)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owners is not None:
            await self._owners.close()
        if self._owns_channel:
            await self._channel.close()

    async def _call(self, method: str, request: Any, *, retry: bool = True) -> Any:
        """Call the stub's `method`, retrying UNAVAILABLE within the retry policy (with `retry`)."""
        policy, loop = self._retry, asyncio.get_running_loop()
        attempts = policy.attempts if retry else 1
        give_up_at = loop.time() + policy.deadline if retry and policy.deadline is not None else None
        attempt = redirects = 0
        while True:
            timeout = self._timeout
            if give_up_at is not None:
                left = give_up_at - loop.time()
                timeout = left if timeout is None else min(timeout, left)
            stub, metadata = self._route(request)
            try:
                return await getattr(stub, method)(request, timeout=timeout, metadata=metadata)
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                if redirects < MAX_REDIRECTS and self._followed(request, error, stub):
                    redirects += 1  # nothing was done (even a call never retried may go on): ask the owner now
                    continue
                if not retry or not isinstance(error, UnavailableError) or attempt == attempts - 1:
                    raise error from None
            pause = policy.backoff(attempt)
            if give_up_at is not None and loop.time() + pause >= give_up_at:
                raise error from None  # the next attempt would start after the deadline: the last error says why
            await asyncio.sleep(pause)
            attempt += 1


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

    async def _resumable(
        self,
        open_stream: Callable[[int], tuple[Any, Any, Any]],
        decode: Callable[[Any], tuple[int, T] | None],
        cursor: int,
        resume: bool,
    ) -> AsyncIterator[T]:
        """Yield decoded messages (skipping those `decode` returns None for), reopening the stream from the
        last cursor after a resumable failure, within the policy's attempts and deadline. `open_stream(cursor)`
        gives the request, the stub it was sent on, and the call."""
        reopenings, redirects = Reopenings(self._retry), 0
        while True:
            request, stub, call = open_stream(cursor)
            try:
                async for message in call:
                    reopenings.reset()
                    redirects = 0
                    decoded = decode(message)
                    if decoded is not None:
                        cursor, item = decoded
                        yield item
                return
            except grpc.aio.AioRpcError as e:
                if self._followed(request, from_rpc_error(e), stub) and redirects < MAX_REDIRECTS:
                    redirects += 1
                    continue  # nothing was sent yet: open it at the owner now
                pause = reopenings.failed(resumable=resume and e.code() in _RESUMABLE)
                if pause is None:
                    raise from_rpc_error(e) from None
            finally:
                call.cancel()
            await asyncio.sleep(pause)
