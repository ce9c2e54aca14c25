"""Errors raised by the state engine; the gRPC layer maps each class to one status code, and sends its
`reason` and what structure it carries (`paths`, `field`, revisions, `limit`) as google.rpc.Status details
(server/rpc/status_details.py, docs/guarantees.md "Error details").

StateError
├── NotFoundError            unknown execution, or a revision that does not exist
├── AlreadyExistsError       execution id taken; idempotency key reused for another patch
├── InvalidArgumentError     not JSON, wrong shape, over a limit, schema violation
│   └── SchemaViolationError the candidate state fails the execution's JSON Schema
├── ConflictError            overlapping concurrent write under the `reject` policy
├── BaseAheadError           a base revision newer than head
├── OutOfRangeError          a revision outside what exists or is retained
├── WatcherTooSlowError      a subscriber fell behind its bounded queue
├── LimitExceededError       over a quota: calls in flight, watchers, the size of a state
├── UnauthenticatedError     no credential, or one that is unknown, revoked or expired
├── PermissionDeniedError    a valid credential without the right to this call, agent id or path
└── StorageError             the revision log failed; nothing was acknowledged
    ├── StorageFullError     the database reached its size cap, or the disk is full
    ├── RolledBackError      merged on a revision whose commit failed
    ├── DuplicateRowError    a row with the same key exists; the batch was not committed
    └── CorruptLogError      an execution's log fails its hash chain
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar


class StateError(Exception):
    """Root of every error the engine raises on purpose; `reason` is its class's stable UPPER_SNAKE name,
    inherited by a subclass that does not name its own."""

    reason: ClassVar[str] = "STATE_ERROR"


class NotFoundError(StateError):
    """The execution (or the requested item of it) does not exist."""

    reason = "NOT_FOUND"


class AlreadyExistsError(StateError):
    """The name is taken."""

    reason = "ALREADY_EXISTS"


class InvalidArgumentError(StateError):
    """The request is malformed; the message names the field or path and the rule. `field` is the request
    field at fault where the raiser says so; else it is read from the message's leading `name: `."""

    reason = "INVALID_ARGUMENT"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SchemaViolationError(InvalidArgumentError):
    """The candidate state does not validate; `violations` lists `path: message (keyword)` lines."""

    reason = "SCHEMA_VIOLATION"

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        super().__init__("schema violation: " + "; ".join(self.violations))


class ConflictError(StateError):
    """A stale patch overlaps concurrent changes at paths whose policy is `reject`."""

    reason = "CONFLICT"

    def __init__(self, paths: Sequence[str], head_revision: int, reasons: Sequence[str] = ()) -> None:
        self.paths = list(paths)
        self.head_revision = head_revision
        detail = "; ".join(reasons) if reasons else "policy reject"
        super().__init__(
            f"conflict at {', '.join(self.paths)} ({detail}); head is revision {head_revision}: "
            "re-read the state and retry"
        )


class BaseAheadError(StateError):
    """The patch claims a base revision the execution has not reached (both revisions, where known)."""

    reason = "BASE_AHEAD"

    def __init__(self, message: str, *, base_revision: int | None = None, head_revision: int | None = None) -> None:
        super().__init__(message)
        self.base_revision, self.head_revision = base_revision, head_revision


class OutOfRangeError(StateError):
    """The revision asked for is outside what exists or is still retained; where known, `revision` is the one
    asked for, `head_revision` the newest and `oldest_revision` the oldest still readable."""

    reason = "OUT_OF_RANGE"

    def __init__(
        self,
        message: str,
        *,
        revision: int | None = None,
        head_revision: int | None = None,
        oldest_revision: int | None = None,
    ) -> None:
        super().__init__(message)
        self.revision, self.head_revision, self.oldest_revision = revision, head_revision, oldest_revision


class WatcherTooSlowError(StateError):
    """A watch or observation subscriber fell behind its bounded queue and was dropped."""

    reason = "WATCHER_TOO_SLOW"


class LimitExceededError(StateError):
    """A quota was reached (calls in flight, watchers, state size); the message names it and its value.
    `limit` is the limit's setting name and `limit_value` its value, where the raiser says so."""

    reason = "LIMIT_EXCEEDED"

    def __init__(self, message: str, *, limit: str | None = None, limit_value: int | None = None) -> None:
        super().__init__(message)
        self.limit, self.limit_value = limit, limit_value


class UnauthenticatedError(StateError):
    """The call carries no valid credential."""

    reason = "UNAUTHENTICATED"


class PermissionDeniedError(StateError):
    """The caller's credential does not allow this call, this agent id or a path it writes."""

    reason = "PERMISSION_DENIED"


class StorageError(StateError):
    """The durable log failed; the operation was not acknowledged."""

    reason = "STORAGE_FAILED"


class StorageFullError(StorageError):
    """The database reached its size cap (`serve --max-db-bytes`) or the disk is full; nothing of the commit
    was written or acknowledged."""

    reason = "STORAGE_FULL"


class RolledBackError(StorageError):
    """Not committed: it was merged on a revision whose commit failed (a retry merges it again)."""

    reason = "ROLLED_BACK"


class DuplicateRowError(StorageError):
    """A row with the same primary key is already stored; nothing of the batch was committed."""

    reason = "DUPLICATE_ROW"


class CorruptLogError(StorageError):
    """What the log holds for an execution fails its hash chain: it was altered or damaged."""

    reason = "CORRUPT_LOG"


class NotOwnerError(StateError):
    """Another replica of a shared log owns the execution (holds its lease): the call belongs there.
    `owner_address` is where that replica takes calls; `expires_in` the seconds its lease has left."""

    reason = "NOT_OWNER"

    def __init__(self, execution_id: str, owner_address: str, expires_in: float) -> None:
        super().__init__(f"execution {execution_id!r} is owned by the replica at {owner_address}")
        self.execution_id, self.owner_address, self.expires_in = execution_id, owner_address, expires_in


class FencedError(StorageError):
    """Not committed: this replica's lease on an execution of the commit was taken over by another replica
    (its epoch is no longer the lease's), so it may no longer write it. Nothing of the commit was written."""

    reason = "FENCED"

    def __init__(self, epochs: Mapping[str, int]) -> None:
        self.epochs = dict(epochs)
        """Each execution taken over -> the epoch this replica held it at."""
        self.execution_ids = sorted(self.epochs)
        named = ", ".join(map(repr, self.execution_ids))
        super().__init__(f"not committed: this replica no longer owns execution(s) {named}")
