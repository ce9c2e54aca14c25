"""Forwarding a call to the replica that owns its execution (server/engine/leaseholder.py), as a Kafka broker
or an etcd follower sends a client to the partition's leader, except that the replica asked makes the call
itself: a client may call any replica.

A client may ask to be redirected instead (REDIRECT): it is answered UNAVAILABLE `NOT_OWNER` naming the
owner's address, and calls the owner itself from then on (the SDK's `StateClient(follow_owners=True)`).

The forwarded call carries the caller's own metadata (its `authorization` credential included), so the owner
admits it as the original caller's, with the same identity and rights, and its answer (status, message and
details) is relayed unchanged. A forwarded call is marked (FORWARDED_BY): one hop at most, so two replicas
that disagree for a moment about an owner never send a call back and forth. When the owner cannot be
reached or is no longer the owner, the call is routed again: to the next owner, or, once the dead owner's
heartbeat expired, taken over and served here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ..errors import FencedError, NotOwnerError, RolledBackError, StorageError
from ..metrics import NO_METRICS, Metrics

R = TypeVar("R")

FORWARDED_BY = "skillstate-forwarded-by"
"""Metadata of a forwarded call: the id of the replica that forwarded it."""
REDIRECT = ("skillstate-route", "redirect")
"""Metadata of a client that follows owners (the SDK's `follow_owners`): a replica that does not own the
execution answers UNAVAILABLE `NOT_OWNER` with `owner_address` instead of forwarding."""
ROUTING_SECONDS = 15.0
"""How long one call keeps looking for its execution's owner (past a dead owner's lease) before it fails
UNAVAILABLE (the client's retry policy may try again)."""
MOVED = frozenset({NotOwnerError.reason, FencedError.reason})
"""The reasons an owner's answer means the execution has moved: route the call again."""
REPEATABLE = frozenset({"GetState", "GetHistory", "Compact", "Watch", "StreamObservations", "AckObservations"})
"""Methods a second call of which changes nothing the first did not (reads, a compaction to a revision, an
acknowledgement); SubmitPatch too when it carries an idempotency key."""
CHANNEL_OPTIONS = (
    # a replica restarted at its address is reached again within 0.1-1 s (gRPC's default waits 1 s and more)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
RECHECK_SECONDS = 0.25
"""How often a call whose owner failed looks at the lease again (a replica shutting down hands its leases
over as soon as its last calls are done; a dead one's expire)."""
MAX_CHANNELS = 64
"""Channels to owners kept open at most (one per address: replicas restarted on new ports leave old ones)."""
_NOT_FORWARDED = ("user-agent", "content-type", "te", FORWARDED_BY)


class Rerouted(Exception):
    """The owner could not take the call (gone, or no longer the owner): route it again."""


class Forwarder:
    """Calls owners on behalf of this replica's callers, over one channel per owner address."""

    def __init__(
        self,
        replica_id: str,
        owns: Callable[[str], Awaitable[bool]],
        patience: float,
        credentials: grpc.ChannelCredentials | None = None,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        """`owns(execution_id)` tells whether this replica holds the execution's lease, taking it if its owner's
        heartbeat expired; it is asked every `patience` seconds an owner takes to answer a unary call."""
        self._replica_id, self._owns, self._patience, self._credentials = replica_id, owns, patience, credentials
        self._metrics = metrics
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closing: set[asyncio.Future[None]] = set()

    @staticmethod
    def forwarded(context: grpc.aio.ServicerContext) -> bool:
        """Whether the call must not be forwarded: it was already, or its client asked to be redirected (it
        is then answered NOT_OWNER with the owner's address)."""
        return any(
            key == FORWARDED_BY or (key, value) == REDIRECT for key, value in context.invocation_metadata() or ()
        )

    async def route(
        self,
        serve: Callable[[], Awaitable[R]],
        forward: Callable[[str], Awaitable[R]],
        context: grpc.aio.ServicerContext,
    ) -> R:
        """Serve the call here, or forward it to its execution's owner, until one of them answers."""
        give_up_at = asyncio.get_running_loop().time() + ROUTING_SECONDS
        failed: str | None = None
        while True:
            try:
                return await serve()
            except (FencedError, RolledBackError):  # taken over mid-call (nothing of it was committed): look again
                if asyncio.get_running_loop().time() > give_up_at:
                    raise
                await asyncio.sleep(0.01)
            except NotOwnerError as e:
                if self.forwarded(context) or asyncio.get_running_loop().time() > give_up_at:
                    raise
                if e.owner_address == failed:  # still the owner that failed: taken once its heartbeat expires
                    await asyncio.sleep(min(max(e.expires_in, 0.05), RECHECK_SECONDS))
                    failed = None
                    continue
                try:
                    return await forward(e.owner_address)
                except Rerouted:
                    failed = e.owner_address  # look again at once: it may have handed its leases over

    async def unary(self, address: str, path: str, request: Any, reply: type[R], context: Any) -> R:
        """The owner's answer. An owner slow to answer is waited for as long as it holds the lease; one that
        stalls past it loses it to this replica, and the call is routed again. A call that may have taken
        effect at an owner that failed is routed again only if taking effect twice is impossible
        (`repeatable`); else the caller hears UNAVAILABLE, the status whose outcome is unknown, as from a
        server that died under its call (a deposed owner can commit nothing more: its commits are fenced)."""
        self._metrics.forwarded(_method(path))
        call = self._channel(address).unary_unary(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        answer = asyncio.ensure_future(
            call(request, metadata=self._metadata(context), timeout=context.time_remaining())
        )
        try:
            while not (await asyncio.wait({answer}, timeout=self._patience))[0]:
                if await self._took_over(request.execution_id) and not answer.done():
                    answer.cancel()
                    await self._relay(None, context, repeatable(path, request), f"the owner at {address} stalled")
            return answer.result()  # type: ignore[no-any-return]
        except grpc.aio.AioRpcError as e:
            await self._relay(e, context, repeatable(path, request))
            raise
        finally:
            answer.cancel()

    async def _took_over(self, execution_id: str) -> bool:
        """Whether this replica now holds the lease of an execution whose owner is slow to answer; not yet if
        the take cannot tell (the owner's commit still holds the lease, or the log is unreachable)."""
        try:
            return await self._owns(execution_id)
        except StorageError:
            return False

    async def stream(self, address: str, path: str, request: Any, reply: type[R], context: Any) -> AsyncIterator[R]:
        """The owner's stream; Rerouted if it fails before its first message for a reason that re-routes."""
        self._metrics.forwarded(_method(path))
        call = self._channel(address).unary_stream(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        return await self._relayed(call(request, metadata=self._metadata(context)), context, repeatable=True)

    async def bidi(
        self, address: str, path: str, requests: AsyncIterator[Any], reply: type[R], context: Any
    ) -> AsyncIterator[R]:
        self._metrics.forwarded(_method(path))
        call = self._channel(address).stream_stream(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        # a session's submits read by a failed call are gone with it: never routed again
        return await self._relayed(call(requests, metadata=self._metadata(context)), context, repeatable=False)

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    async def _relayed(self, call: Any, context: Any, repeatable: bool) -> AsyncIterator[R]:
        """The owner's stream once its first message came (so that a failure to reach it may still re-route,
        when the stream is `repeatable`); a failure after that ends the caller's stream with the owner's
        status (a client resumes it)."""
        iterator = call.__aiter__()
        try:
            first = await anext(iterator, None)
        except grpc.aio.AioRpcError as e:
            await self._relay(e, context, repeatable)
            raise

        async def relayed() -> AsyncIterator[R]:
            try:
                if first is None:
                    return
                yield first
                async for message in iterator:
                    yield message
            except grpc.aio.AioRpcError as e:
                await _abort_as(e, context)
            finally:
                call.cancel()

        return relayed()

    async def _relay(
        self, error: grpc.aio.AioRpcError | None, context: Any, repeatable: bool, stalled: str = ""
    ) -> None:
        """Answer the caller with the owner's status, or raise Rerouted when the call should look again: the
        execution moved (nothing was done), the owner was not reached at all, or it failed under a call that
        may be repeated (gone, cancelled by its shutdown, or `stalled` past its lease: error None)."""
        code, reason = (error.code(), _reason(error)) if error is not None else (None, None)
        details = error.details() if error is not None else stalled
        if error is not None and (reason in MOVED or (code == grpc.StatusCode.UNAVAILABLE and _never_sent(error))):
            raise Rerouted(details) from error
        gone = reason is None and code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        if (error is None or gone) and repeatable:
            raise Rerouted(details) from error
        if error is None or gone:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"the owner of the execution failed under the call: "
                                f"it may or may not have taken effect ({details})")  # fmt: skip
        assert error is not None
        await _abort_as(error, context)

    def _metadata(self, context: Any) -> list[tuple[str, str | bytes]]:
        kept = [(k, v) for k, v in context.invocation_metadata() or () if k not in _NOT_FORWARDED and k[0] != ":"]
        return [*kept, (FORWARDED_BY, self._replica_id)]

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.pop(address, None)
        if channel is None:
            if len(self._channels) >= MAX_CHANNELS:  # the least recently used, to an owner long gone
                oldest = self._channels.pop(next(iter(self._channels)))
                self._closing.add(task := asyncio.ensure_future(oldest.close()))
                task.add_done_callback(self._closing.discard)
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(address, CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.secure_channel(address, self._credentials, CHANNEL_OPTIONS)
        self._channels[address] = channel  # the most recently used last
        return channel


async def primed(stream: AsyncIterator[R]) -> AsyncIterator[R]:
    """The stream once its first message came (or it ended): an error before then is raised here."""
    iterator = stream.__aiter__()
    first = await anext(iterator, _ENDED)

    async def rest() -> AsyncIterator[R]:
        if first is _ENDED:
            return
        yield first
        async for message in iterator:
            yield message

    return rest()


_ENDED: Any = object()


async def _abort_as(error: grpc.aio.AioRpcError, context: Any) -> None:
    """End the caller's call with the owner's status: its code, message and trailers (the details)."""
    trailers = tuple((key, value) for key, value in error.trailing_metadata() or ())
    await context.abort(error.code(), error.details() or "", trailers)


def repeatable(path: str, request: Any) -> bool:
    """Whether calling `path` again with `request` after a failure of unknown outcome cannot do twice what
    the first did."""
    method = _method(path)
    return method in REPEATABLE or (method == "SubmitPatch" and bool(request.client_patch_id))


def _method(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _never_sent(error: grpc.aio.AioRpcError) -> bool:
    """Whether the call failed before it reached the owner (no connection could be made)."""
    return "failed to connect" in (error.details() or "")


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()  # type: ignore[no-any-return]


def _reason(error: grpc.aio.AioRpcError) -> str | None:
    """The ErrorInfo reason of a skillstate server's status; None when it sent none (not reached)."""
    with contextlib.suppress(Exception):
        status = rpc_status.from_call(error)
        for detail in status.details if status is not None else ():
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return str(info.reason)
    return None
