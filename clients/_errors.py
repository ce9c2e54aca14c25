"""Errors the client raises: each carries the gRPC status code, the server's message, and the structured
details the server sends with it (google.rpc.Status: ErrorInfo, BadRequest; docs/guarantees.md "Error
details"). An error without details (an older server, or gRPC's own such as DEADLINE_EXCEEDED) has them
empty: `reason` None, `metadata` {}, `field_violations` [], and the typed attributes below None or [].

SkillstateError                 any failed call (status, message, reason, metadata, field_violations)
├── NotFoundError               NOT_FOUND: unknown execution
├── AlreadyExistsError          ALREADY_EXISTS: id taken, or idempotency key reused for another patch
├── ValidationError             INVALID_ARGUMENT: bad JSON, over a limit, schema violation
├── ConflictError               ABORTED: conflict under `reject`; re-read and retry (paths, head_revision)
├── PreconditionError           FAILED_PRECONDITION: base revision ahead of head (base_revision, head_revision)
├── OutOfRangeError             OUT_OF_RANGE: a revision that does not exist or was compacted
│                               (revision, head_revision, oldest_revision)
├── ResourceExhaustedError      RESOURCE_EXHAUSTED: a stream fell too far behind, or a limit on concurrent use
│                               (limit, limit_value)
├── UnauthenticatedError        UNAUTHENTICATED: no credential, or one unknown, revoked or expired
├── PermissionDeniedError       PERMISSION_DENIED: the credential lacks the right, the agent id or the path
├── UnavailableError            UNAVAILABLE: server unreachable or its log failed; safe to retry
└── DataLossError               DATA_LOSS: the server's log of this execution fails its integrity check

PackageReadError (an OSError, _packages.py) is no call's: a package folder could not be read to be sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

DOMAIN = "skillstate.dev"
"""The `ErrorInfo.domain` of the server's errors."""

_DETAILS_KEY = "grpc-status-details-bin"


class SkillstateError(Exception):
    """A call failed; `status` is the gRPC status code and `message` the server's explanation.

    `reason` is the stable name of what went wrong (`CONFLICT`, `SCHEMA_VIOLATION`, `NOT_FOUND`, ...; the
    server's `ErrorInfo.reason`), `metadata` its structured facts as strings, and `field_violations` the
    `(field, description)` pairs of a refused request (the request field, or a schema violation's path in the
    state). All are empty when the server sent no details."""

    status: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        status: grpc.StatusCode | None = None,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations: list[tuple[str, str]] = list(field_violations)

    def __str__(self) -> str:
        return f"{self.status.name}: {self.message}"

    def _int(self, key: str) -> int | None:
        try:
            return int(self.metadata[key])
        except (KeyError, ValueError):
            return None


class NotFoundError(SkillstateError):
    status = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(SkillstateError):
    status = grpc.StatusCode.ALREADY_EXISTS


class ValidationError(SkillstateError):
    status = grpc.StatusCode.INVALID_ARGUMENT


class ConflictError(SkillstateError):
    status = grpc.StatusCode.ABORTED

    @property
    def paths(self) -> list[str]:
        """The JSON Pointers the patch conflicted at."""
        try:
            paths = json.loads(self.metadata.get("paths", "[]"))
        except ValueError:
            return []
        return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []

    @property
    def head_revision(self) -> int | None:
        """The head revision when the patch was refused: re-read at least this."""
        return self._int("head_revision")


class PreconditionError(SkillstateError):
    status = grpc.StatusCode.FAILED_PRECONDITION

    @property
    def base_revision(self) -> int | None:
        """The base revision the patch claimed."""
        return self._int("base_revision")

    @property
    def head_revision(self) -> int | None:
        """The head revision, behind that base."""
        return self._int("head_revision")


class OutOfRangeError(SkillstateError):
    status = grpc.StatusCode.OUT_OF_RANGE

    @property
    def revision(self) -> int | None:
        """The revision asked for."""
        return self._int("revision")

    @property
    def head_revision(self) -> int | None:
        """The newest revision, when the one asked for is past it (or too far behind it)."""
        return self._int("head_revision")

    @property
    def oldest_revision(self) -> int | None:
        """The oldest revision still readable, when the one asked for was compacted away."""
        return self._int("oldest_revision")


class ResourceExhaustedError(SkillstateError):
    status = grpc.StatusCode.RESOURCE_EXHAUSTED

    @property
    def limit(self) -> str | None:
        """The name of the server's limit that was reached (`max_state_bytes`, ...), where it says."""
        return self.metadata.get("limit")

    @property
    def limit_value(self) -> int | None:
        """That limit's value."""
        return self._int("limit_value")


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

_CODES = {code.value[0]: code for code in grpc.StatusCode}


def from_rpc_error(error: grpc.aio.AioRpcError) -> SkillstateError:
    """The typed error for a failed call, with the details of its `grpc-status-details-bin` trailer."""
    return _decode(error.code(), error.details() or "", _trailer_status(error))


def from_status(status: status_pb2.Status) -> SkillstateError:
    """The typed error for a `google.rpc.Status` sent as a message (a Session's refused submit)."""
    return _decode(_CODES.get(status.code, grpc.StatusCode.UNKNOWN), status.message, status)


def _trailer_status(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    """The status in the trailer, if one is there and parses (rpc_status.from_call would raise on a status
    whose code or message differs from the call's: the call's win here, the details are kept)."""
    for key, value in error.trailing_metadata() or ():
        if key == _DETAILS_KEY and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except DecodeError:
                return None
    return None


def _decode(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> SkillstateError:
    """The one decoder of both: the class by code, the message, and the ErrorInfo and BadRequest details."""
    infos: list[error_details_pb2.ErrorInfo] = []
    violations: list[tuple[str, str]] = []
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            request = error_details_pb2.BadRequest()
            detail.Unpack(request)
            violations.extend((v.field, v.description) for v in request.field_violations)
    info = next((i for i in infos if i.domain == DOMAIN), infos[0] if infos else None)
    cls = _BY_STATUS.get(code, SkillstateError)
    return cls(
        message or code.name,
        code,
        reason=(info.reason or None) if info is not None else None,
        metadata=info.metadata if info is not None else None,
        field_violations=violations,
    )
