"""gRPC plumbing shared by the services: one layer around every method that admits the call, maps its error
to its status (the table and the details are status_details.py's) and measures it (etcd's v3rpc interceptors
and util.go)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError
from grpc_status import rpc_status

from ..auth.guard import CALLER, Guard, Identity
from ..errors import InvalidArgumentError, PermissionDeniedError, StateError, UnauthenticatedError
from ..metrics import Metrics
from .forwarding import Forwarder, primed
from .status_details import error_status

R = TypeVar("R")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request the protobuf runtime refused (for example a string field that is not UTF-8)."""

    message_type: str
    reason: str

    def error(self) -> InvalidArgumentError:
        return InvalidArgumentError(f"request is not a valid {self.message_type}: {self.reason}")


@dataclass(frozen=True, slots=True)
class Call:
    """What every handler of one RPC shares: its name, the guard that admits its calls, the metrics."""

    name: str
    guard: Guard
    metrics: Metrics
    path: str = ""
    """The method's full path (/package.Service/Method), for forwarding."""
    reply: Any = None
    """The method's response message class."""
    forwarder: Forwarder | None = None
    """On replicas with leases: forwards a call for an execution another replica owns (forwarding.py)."""

    async def serve(
        self, implementation: Callable[[Any, Any], Awaitable[R]], request: Any, context: Any, identity: Identity
    ) -> R:
        """A unary call's answer: from here, in one of this server's seats, or from its execution's owner (no
        seat is held here meanwhile: replicas forwarding to each other must not wait for each other's seats)."""

        async def here() -> R:
            async with self.guard.admitted(identity, context.peer()):
                return await implementation(request, context)

        if self.forwarder is None:
            return await here()
        forwarder = self.forwarder
        return await forwarder.route(
            here,
            lambda owner: forwarder.unary(owner, self.path, request, self.reply, context),
            context,
        )

    async def stream(
        self, implementation: Callable[[Any, Any], AsyncIterator[R]], request: Any, context: Any
    ) -> AsyncIterator[R]:
        """A server stream's messages: from here, or from its execution's owner (which one is known once the
        first message comes)."""
        if self.forwarder is None:
            return implementation(request, context)
        forwarder = self.forwarder
        return await forwarder.route(
            lambda: primed(implementation(request, context)),
            lambda owner: forwarder.stream(owner, self.path, request, self.reply, context),
            context,
        )

    async def admit(self, request: Any, context: grpc.aio.ServicerContext) -> Identity:
        """The caller, bound to the task (CALLER) for the handler; a request that did not decode is refused
        once the caller is known to have the right to make the call at all."""
        message = None if isinstance(request, Undecodable) else request
        identity = await self.guard.admit(self.name, message, context.invocation_metadata())
        if isinstance(request, Undecodable):
            raise request.error()
        CALLER.set(identity)
        return identity

    async def fail(self, error: Exception, context: grpc.aio.ServicerContext) -> None:
        """Answer with the error's status: an engine error's code from the table and its message, with its
        details in the `grpc-status-details-bin` trailer; anything else INTERNAL (logged)."""
        if isinstance(error, StateError):
            if isinstance(error, UnauthenticatedError | PermissionDeniedError):
                self.guard.refused(self.name, context.peer(), error)
            await context.abort_with_status(rpc_status.to_status(error_status(error)))
        log.error("%s failed", self.name, exc_info=error)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {self.name} (logged by the server)")

    def done(self, started: float, context: grpc.aio.ServicerContext) -> None:
        code = context.code()
        status = "OK" if code is None else code.name if isinstance(code, grpc.StatusCode) else str(code)
        self.metrics.rpc(self.name, time.perf_counter() - started, status)


def _unary(
    implementation: Callable[[Any, grpc.aio.ServicerContext], Awaitable[R]], call: Call
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[R]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> R:
        started = time.perf_counter()
        try:
            identity = await call.admit(request, context)
            return await call.serve(implementation, request, context, identity)
        except Exception as e:
            if isinstance(e, grpc.aio.AbortError):
                raise
            await call.fail(e, context)
            raise  # unreachable: abort raises
        finally:
            call.done(started, context)

    return handle


def _stream(
    implementation: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[R]], call: Call
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[R]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[R]:
        started = time.perf_counter()
        try:
            identity = await call.admit(request, context)
            peer = context.peer()
            async for message in await call.stream(implementation, request, context):
                await call.guard.revalidate(identity)  # a revoked or expired credential ends its streams
                await call.guard.turn(identity, peer)
                yield message
        except Exception as e:
            if isinstance(e, grpc.aio.AbortError):
                raise
            await call.fail(e, context)
        finally:
            call.done(started, context)

    return handle


def _bidi(
    implementation: Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], AsyncIterator[R]], call: Call
) -> Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], AsyncIterator[R]]:
    """A stream of requests is admitted on its credential alone (the handler authorizes each message with
    `Guard.authorize`); each message sent takes its identity's turn, as in a server stream."""

    async def handle(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[R]:
        started = time.perf_counter()
        try:
            identity = await call.admit(None, context)
            peer = context.peer()
            async for message in implementation(requests, context):
                await call.guard.turn(identity, peer)
                yield message
        except Exception as e:
            if isinstance(e, grpc.aio.AbortError):
                raise
            await call.fail(e, context)
        finally:
            call.done(started, context)

    return handle


def _lenient_parser(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except DecodeError as e:
            return Undecodable(message_class.DESCRIPTOR.name, str(e).rsplit(": ", 1)[-1])

    return parse


def add_service(
    servicer: Any,
    server: grpc.aio.Server,
    module: ModuleType,
    service_name: str,
    guard: Guard,
    metrics: Metrics,
    forwarder: Forwarder | None = None,
) -> None:
    """Register a servicer like the generated add_XServicer_to_server, with one layer around every method:
    the guard admits the call (identity, rights, calls in flight), an error becomes its status code, and the
    call is measured. With a forwarder, a call for an execution another replica owns is served there. A
    request that fails to decode is answered INVALID_ARGUMENT, not UNKNOWN."""
    service = module.DESCRIPTOR.services_by_name[service_name]
    handlers = {}
    for method in service.methods:
        implementation = getattr(servicer, method.name)
        reply = getattr(module, method.output_type.name)
        call = Call(method.name, guard, metrics, f"/{service.full_name}/{method.name}", reply, forwarder)
        handler: Any
        if method.client_streaming:
            make, handler = grpc.stream_stream_rpc_method_handler, _bidi(implementation, call)
        elif method.server_streaming:
            make, handler = grpc.unary_stream_rpc_method_handler, _stream(implementation, call)
        else:
            make, handler = grpc.unary_unary_rpc_method_handler, _unary(implementation, call)
        handlers[method.name] = make(
            handler,
            request_deserializer=_lenient_parser(getattr(module, method.input_type.name)),
            response_serializer=reply.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
