"""gRPC plumbing shared by the services: one table from engine errors to status codes, handler wrappers
that apply it, and registration that answers an undecodable request INVALID_ARGUMENT instead of UNKNOWN."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError

from ..auth.guard import CALLER, Guard, Identity
from ..errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    CorruptLogError,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    StateError,
    StorageError,
    StorageFullError,
    UnauthenticatedError,
    WatcherTooSlowError,
)
from ..metrics import Metrics

STATUS_BY_ERROR: dict[type[StateError], grpc.StatusCode] = {
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    ConflictError: grpc.StatusCode.ABORTED,
    BaseAheadError: grpc.StatusCode.FAILED_PRECONDITION,
    OutOfRangeError: grpc.StatusCode.OUT_OF_RANGE,
    WatcherTooSlowError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    LimitExceededError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    StorageError: grpc.StatusCode.UNAVAILABLE,
    StorageFullError: grpc.StatusCode.RESOURCE_EXHAUSTED,
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


def unary(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
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


def stream(method: Callable[..., AsyncIterator[R]]) -> Callable[..., AsyncIterator[R]]:
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


def _guarded_unary(
    handler: Callable[[Any, grpc.aio.ServicerContext], Awaitable[R]], name: str, guard: Guard, metrics: Metrics
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[R]]:
    async def admitted(request: Any, context: grpc.aio.ServicerContext) -> R:
        started = time.perf_counter()
        try:
            identity = await _admit(guard, name, request, context)
            with guard.in_flight(identity, context.peer()):
                CALLER.set(identity)
                return await handler(request, context)
        except StateError as e:
            await context.abort(status_of(e), str(e))
            raise  # unreachable: abort raises
        finally:
            metrics.rpc(name, time.perf_counter() - started, _status(context))

    return admitted


def _guarded_stream(
    handler: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[R]], name: str, guard: Guard, metrics: Metrics
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[R]]:
    async def admitted(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[R]:
        started = time.perf_counter()
        try:
            try:
                identity = await _admit(guard, name, request, context)
            except StateError as e:
                await context.abort(status_of(e), str(e))
                raise  # unreachable: abort raises
            CALLER.set(identity)
            async for message in handler(request, context):
                yield message
        finally:
            metrics.rpc(name, time.perf_counter() - started, _status(context))

    return admitted


def _status(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return "OK" if code is None else code.name if isinstance(code, grpc.StatusCode) else str(code)


async def _admit(guard: Guard, name: str, request: Any, context: grpc.aio.ServicerContext) -> Identity:
    message = None if isinstance(request, Undecodable) else request
    return await guard.admit(name, message, context.invocation_metadata(), context.peer())


def _lenient_parser(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except DecodeError as e:
            return Undecodable(message_class.DESCRIPTOR.name, str(e).rsplit(": ", 1)[-1])

    return parse


def add_service(
    servicer: Any, server: grpc.aio.Server, module: ModuleType, service_name: str, guard: Guard, metrics: Metrics
) -> None:
    """Register a servicer like the generated add_XServicer_to_server, except that every call is admitted by
    the guard first, and a request that fails to decode reaches the servicer as Undecodable and is answered
    INVALID_ARGUMENT, not UNKNOWN."""
    service = module.DESCRIPTOR.services_by_name[service_name]
    handlers = {}
    for method in service.methods:
        implementation = getattr(servicer, method.name)
        handler: Any
        if method.server_streaming:
            make, handler = (
                grpc.unary_stream_rpc_method_handler,
                _guarded_stream(implementation, method.name, guard, metrics),
            )
        else:
            make, handler = (
                grpc.unary_unary_rpc_method_handler,
                _guarded_unary(implementation, method.name, guard, metrics),
            )
        handlers[method.name] = make(
            handler,
            request_deserializer=_lenient_parser(getattr(module, method.input_type.name)),
            response_serializer=getattr(module, method.output_type.name).SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
