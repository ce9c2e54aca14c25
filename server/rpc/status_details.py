"""Engine errors as `google.rpc.Status`: the one table from engine errors to status codes, and the details a
failed call carries in its `grpc-status-details-bin` trailer (or a stream sends as a message: a Session's
refused submit), as Google APIs send them (AIP-193).

Every status has an `ErrorInfo`: `reason` is the error class's stable name (`StateError.reason`), `domain`
is DOMAIN, `metadata` what structure the error has (a conflict's paths and head revision, the revisions of
a base ahead of head or out of range, the name of a limit). An INVALID_ARGUMENT also has a `BadRequest`
whose field violations name the request field (or, for a schema violation, the path in the state) and the
rule. The message is the error's text, unchanged. docs/guarantees.md ("Error details") lists the keys.
"""

from __future__ import annotations

import json
import re

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from ..errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    CorruptLogError,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    NotOwnerError,
    OutOfRangeError,
    PermissionDeniedError,
    SchemaViolationError,
    StateError,
    StorageError,
    StorageFullError,
    UnauthenticatedError,
    WatcherTooSlowError,
)

DOMAIN = "skillstate.dev"
"""`ErrorInfo.domain` of every error the server sends on purpose."""

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
    NotOwnerError: grpc.StatusCode.UNAVAILABLE,
    StorageFullError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    CorruptLogError: grpc.StatusCode.DATA_LOSS,
}


def status_of(error: StateError) -> grpc.StatusCode:
    """The status for an engine error: its class's entry, else its nearest ancestor's."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return grpc.StatusCode.INTERNAL


def error_status(error: StateError) -> status_pb2.Status:
    """The status a call failing with `error` ends with: its code, its message, and its details."""
    status = status_pb2.Status(code=status_of(error).value[0], message=str(error))
    _pack(status, error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=_metadata(error)))
    if isinstance(error, InvalidArgumentError):
        violations = _field_violations(error)
        if violations:
            _pack(status, error_details_pb2.BadRequest(field_violations=violations))
    return status


def _pack(status: status_pb2.Status, detail: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> None:
    packed = any_pb2.Any()
    packed.Pack(detail)
    status.details.append(packed)


def _metadata(error: StateError) -> dict[str, str]:
    if isinstance(error, ConflictError):
        # a JSON array: a pointer may itself hold a comma
        return {"paths": json.dumps(error.paths, separators=(",", ":")), "head_revision": str(error.head_revision)}
    if isinstance(error, BaseAheadError):
        return _known(base_revision=error.base_revision, head_revision=error.head_revision)
    if isinstance(error, OutOfRangeError):
        return _known(revision=error.revision, head_revision=error.head_revision, oldest_revision=error.oldest_revision)
    if isinstance(error, LimitExceededError):
        return _known(limit=error.limit, limit_value=error.limit_value)
    if isinstance(error, NotOwnerError):
        return {"owner_address": error.owner_address}
    return {}


def _known(**values: str | int | None) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value is not None}


_LEADING_FIELDS = re.compile(r"([a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*): (.*)", re.DOTALL)
"""A message that starts by naming request fields (lower_snake, as proto fields are): `from_revision: ...`."""


def _field_violations(error: InvalidArgumentError) -> list[error_details_pb2.BadRequest.FieldViolation]:
    """One violation per schema violation line (`path: message (keyword)`); else the field the raiser named,
    or the fields the message starts with, each with the rest of the message. None when no field is named."""
    violation = error_details_pb2.BadRequest.FieldViolation
    if isinstance(error, SchemaViolationError):
        lines = (line.partition(": ") for line in error.violations)
        return [
            violation(field=path, description=rest) if rest else violation(description=path) for path, _, rest in lines
        ]
    message = str(error)
    if error.field is not None:
        description = message.removeprefix(f"{error.field}: ")
        return [violation(field=error.field, description=description)]
    named = _LEADING_FIELDS.fullmatch(message)
    if named is None:
        return []
    return [violation(field=field, description=named[2]) for field in named[1].split(", ")]
