"""error_status: each engine error's code, unchanged message, ErrorInfo reason and metadata, and BadRequest."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from skillstate.clients import _errors as client_errors
from skillstate.server import errors
from skillstate.server.rpc.status_details import DOMAIN, error_status

REASONS = [
    (errors.NotFoundError("execution 'x' not found"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    (errors.AlreadyExistsError("execution 'x' already exists"), grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS"),
    (errors.InvalidArgumentError("page_size: must be >= 0"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    (errors.SchemaViolationError(["/n: bad (type)"]), grpc.StatusCode.INVALID_ARGUMENT, "SCHEMA_VIOLATION"),
    (errors.ConflictError(["/n"], 3), grpc.StatusCode.ABORTED, "CONFLICT"),
    (errors.BaseAheadError("base_revision: ahead"), grpc.StatusCode.FAILED_PRECONDITION, "BASE_AHEAD"),
    (errors.OutOfRangeError("at_revision: outside"), grpc.StatusCode.OUT_OF_RANGE, "OUT_OF_RANGE"),
    (errors.WatcherTooSlowError("fell behind"), grpc.StatusCode.RESOURCE_EXHAUSTED, "WATCHER_TOO_SLOW"),
    (errors.LimitExceededError("state size: over"), grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED"),
    (errors.UnauthenticatedError("no token"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
    (errors.PermissionDeniedError("not yours"), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    (errors.StorageError("disk gone"), grpc.StatusCode.UNAVAILABLE, "STORAGE_FAILED"),
    (errors.StorageFullError("full"), grpc.StatusCode.RESOURCE_EXHAUSTED, "STORAGE_FULL"),
    (errors.RolledBackError("rolled back"), grpc.StatusCode.UNAVAILABLE, "ROLLED_BACK"),
    (errors.DuplicateRowError("duplicate"), grpc.StatusCode.UNAVAILABLE, "DUPLICATE_ROW"),
    (errors.CorruptLogError("chain broken"), grpc.StatusCode.DATA_LOSS, "CORRUPT_LOG"),
]


def unpack(status: status_pb2.Status) -> tuple[error_details_pb2.ErrorInfo, error_details_pb2.BadRequest | None]:
    info, bad_request = None, None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
    assert info is not None
    return info, bad_request


@pytest.mark.parametrize(("error", "code", "reason"), REASONS, ids=[r[2] for r in REASONS])
def test_every_error_has_its_code_message_and_reason(
    error: errors.StateError, code: grpc.StatusCode, reason: str
) -> None:
    status = error_status(error)
    assert (status.code, status.message) == (code.value[0], str(error))
    info, _ = unpack(status)
    assert (info.reason, info.domain) == (reason, "skillstate.dev")


def test_the_client_knows_the_domain() -> None:
    assert client_errors.DOMAIN == DOMAIN


def test_metadata_where_the_error_has_structure() -> None:
    cases = [
        (errors.ConflictError(["/a", "/b,c"], 7), {"paths": '["/a","/b,c"]', "head_revision": "7"}),
        (errors.BaseAheadError("x", base_revision=9, head_revision=2), {"base_revision": "9", "head_revision": "2"}),
        (errors.OutOfRangeError("x", revision=1, oldest_revision=4), {"revision": "1", "oldest_revision": "4"}),
        (
            errors.LimitExceededError("x", limit="max_state_bytes", limit_value=10),
            {"limit": "max_state_bytes", "limit_value": "10"},
        ),
        (errors.OutOfRangeError("no snapshot at revision 3 to compact to"), {}),
    ]
    for error, metadata in cases:
        assert dict(unpack(error_status(error))[0].metadata) == metadata, error


def test_field_violations() -> None:
    cases = [
        (
            errors.InvalidArgumentError("agent_id: must not be empty", field="agent_id"),
            [("agent_id", "must not be empty")],
        ),
        (errors.InvalidArgumentError("a wording of its own", field="query"), [("query", "a wording of its own")]),
        (
            errors.InvalidArgumentError("to_revision: 2 is before from_revision 5"),
            [("to_revision", "2 is before from_revision 5")],
        ),
        (
            errors.InvalidArgumentError("from_revision, to_revision: must be >= 0, got -1, 2"),
            [("from_revision", "must be >= 0, got -1, 2"), ("to_revision", "must be >= 0, got -1, 2")],
        ),
        (
            errors.InvalidArgumentError("patch_json: /a: counter needs a number, got string"),
            [("patch_json", "/a: counter needs a number, got string")],
        ),
        (
            errors.SchemaViolationError(
                ["(root): 'a' is a required property (required)", "/a/b: 1 is not 'x' (const)", "and 2 more"]
            ),
            [("(root)", "'a' is a required property (required)"), ("/a/b", "1 is not 'x' (const)"), ("", "and 2 more")],
        ),
        (errors.InvalidArgumentError("request is not a valid GetStateRequest: bad UTF-8"), None),
        (errors.InvalidArgumentError("SKILL.md: name: required"), None),
    ]
    for error, expected in cases:
        _, bad_request = unpack(error_status(error))
        found = None if bad_request is None else [(v.field, v.description) for v in bad_request.field_violations]
        assert found == expected, error
