"""Errors the client raises: each carries the gRPC status code and the server's message.

SkillstateError                 any failed call (status, message)
├── NotFoundError               NOT_FOUND: unknown execution
├── AlreadyExistsError          ALREADY_EXISTS: id taken, or idempotency key reused for another patch
├── ValidationError             INVALID_ARGUMENT: bad JSON, over a limit, schema violation
├── ConflictError               ABORTED: conflict under `reject`; re-read and retry
├── PreconditionError           FAILED_PRECONDITION: base revision ahead of head
├── OutOfRangeError             OUT_OF_RANGE: a revision that does not exist or was compacted
├── ResourceExhaustedError      RESOURCE_EXHAUSTED: a stream fell too far behind, or a limit on concurrent use
├── UnauthenticatedError        UNAUTHENTICATED: no credential, or one unknown, revoked or expired
├── PermissionDeniedError       PERMISSION_DENIED: the credential lacks the right, the agent id or the path
├── UnavailableError            UNAVAILABLE: server unreachable or its log failed; safe to retry
└── DataLossError               DATA_LOSS: the server's log of this execution fails its integrity check

PackageReadError (an OSError, _packages.py) is no call's: a package folder could not be read to be sent.
"""

from __future__ import annotations

import grpc


class SkillstateError(Exception):
    """A call failed; `status` is the gRPC status code and `message` the server's explanation."""

    status: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, status: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{self.status.name}: {self.message}"


class NotFoundError(SkillstateError):
    status = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(SkillstateError):
    status = grpc.StatusCode.ALREADY_EXISTS


class ValidationError(SkillstateError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class ConflictError(SkillstateError):
    status = grpc.StatusCode.ABORTED


class PreconditionError(SkillstateError):
    status = grpc.StatusCode.FAILED_PRECONDITION


class OutOfRangeError(SkillstateError):
    status = grpc.StatusCode.OUT_OF_RANGE


class ResourceExhaustedError(SkillstateError):
    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class UnauthenticatedError(SkillstateError):
    status = grpc.StatusCode.UNAUTHENTICATED


class PermissionDeniedError(SkillstateError):
    status = grpc.StatusCode.PERMISSION_DENIED


class UnavailableError(SkillstateError):
    status = grpc.StatusCode.UNAVAILABLE


class DataLossError(SkillstateError):
    status = grpc.StatusCode.DATA_LOSS


_BY_STATUS = {
    cls.status: cls
    for cls in (
        NotFoundError,
        AlreadyExistsError,
        ValidationError,
        ConflictError,
        PreconditionError,
        OutOfRangeError,
        ResourceExhaustedError,
        UnauthenticatedError,
        PermissionDeniedError,
        UnavailableError,
        DataLossError,
    )
}


def from_rpc_error(error: grpc.aio.AioRpcError) -> SkillstateError:
    """The typed error for a failed call."""
    code = error.code()
    cls = _BY_STATUS.get(code, SkillstateError)
    return cls(error.details() or code.name, code)
