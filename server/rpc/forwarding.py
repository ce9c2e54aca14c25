"""Forwarding a call to the replica that owns its execution (server/engine/leaseholder.py), as a Kafka broker
or an etcd follower sends a client to the partition's leader, except that the replica asked makes the call
itself: a client may call any replica.

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

from ..errors import FencedError, NotOwnerError

R = TypeVar("R")

FORWARDED_BY = "skillstate-forwarded-by"
"""Metadata of a forwarded call: the id of the replica that forwarded it."""
ROUTING_SECONDS = 15.0
"""How long one call keeps looking for its execution's owner (past a dead owner's lease) before it fails
UNAVAILABLE (the client's retry policy may try again)."""
MOVED = frozenset({NotOwnerError.reason, FencedError.reason})
"""The reasons an owner's answer means the execution has moved: route the call again."""
_NOT_FORWARDED = ("user-agent", "content-type", "te", FORWARDED_BY)


class Rerouted(Exception):
    """The owner could not take the call (gone, or no longer the owner): route it again."""


class Forwarder:
    """Calls owners on behalf of this replica's callers, over one channel per owner address."""

    def __init__(self, replica_id: str, patience: float, credentials: grpc.ChannelCredentials | None = None) -> None:
        """`patience`: seconds a unary call waits for an owner's answer before it routes again (an owner that
        stalls past its lease loses it to the next replica that asks)."""
        self._replica_id, self._patience, self._credentials = replica_id, patience, credentials
        self._channels: dict[str, grpc.aio.Channel] = {}

    @staticmethod
    def forwarded(context: grpc.aio.ServicerContext) -> bool:
        return any(key == FORWARDED_BY for key, _ in context.invocation_metadata() or ())

    async def route(
        self,
        serve: Callable[[], Awaitable[R]],
        forward: Callable[[str], Awaitable[R]],
        context: grpc.aio.ServicerContext,
    ) -> R:
        """Serve the call here, or forward it to its execution's owner, until one of them answers."""
        give_up_at = asyncio.get_running_loop().time() + ROUTING_SECONDS
        while True:
            try:
                return await serve()
            except FencedError:  # taken over mid-call: nothing of it was committed; the next try finds the owner
                if asyncio.get_running_loop().time() > give_up_at:
                    raise
            except NotOwnerError as e:
                if self.forwarded(context) or asyncio.get_running_loop().time() > give_up_at:
                    raise
                try:
                    return await forward(e.owner_address)
                except Rerouted:
                    # a dead owner's executions may be taken once its heartbeat expires: look again then
                    await asyncio.sleep(min(max(e.expires_in, 0.05), 1.0))

    async def unary(self, address: str, path: str, request: Any, reply: type[R], context: Any) -> R:
        call = self._channel(address).unary_unary(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        remaining = context.time_remaining()
        patient = remaining is None or remaining > self._patience
        try:
            return await call(  # type: ignore[no-any-return]
                request, metadata=self._metadata(context), timeout=self._patience if patient else remaining
            )
        except grpc.aio.AioRpcError as e:
            if patient and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise Rerouted(f"the owner at {address} did not answer in {self._patience:g} s") from e
            await self._relay(e, context)
            raise

    async def stream(self, address: str, path: str, request: Any, reply: type[R], context: Any) -> AsyncIterator[R]:
        """The owner's stream; Rerouted if it fails before its first message for a reason that re-routes."""
        call = self._channel(address).unary_stream(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        return await self._relayed(call(request, metadata=self._metadata(context)), context)

    async def bidi(
        self, address: str, path: str, requests: AsyncIterator[Any], reply: type[R], context: Any
    ) -> AsyncIterator[R]:
        call = self._channel(address).stream_stream(path, _serialize, reply.FromString)  # type: ignore[attr-defined]
        return await self._relayed(call(requests, metadata=self._metadata(context)), context)

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    async def _relayed(self, call: Any, context: Any) -> AsyncIterator[R]:
        """The owner's stream once its first message came (so that a failure to reach it may still re-route);
        a failure after that ends the caller's stream with the owner's status (a client resumes it)."""
        iterator = call.__aiter__()
        try:
            first = await anext(iterator, None)
        except grpc.aio.AioRpcError as e:
            await self._relay(e, context)
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

    async def _relay(self, error: grpc.aio.AioRpcError, context: Any) -> None:
        """Answer the caller with the owner's status, or raise Rerouted when the call should look again."""
        if error.code() == grpc.StatusCode.UNAVAILABLE and (_reason(error) in MOVED or _reason(error) is None):
            raise Rerouted(error.details()) from error  # moved, or not reached (an answer would say why)
        await _abort_as(error, context)

    def _metadata(self, context: Any) -> list[tuple[str, str | bytes]]:
        kept = [(k, v) for k, v in context.invocation_metadata() or () if k not in _NOT_FORWARDED and k[0] != ":"]
        return [*kept, (FORWARDED_BY, self._replica_id)]

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(address)
            else:
                channel = grpc.aio.secure_channel(address, self._credentials)
            self._channels[address] = channel
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
