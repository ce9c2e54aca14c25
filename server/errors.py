"""Errors raised by the state engine; the gRPC layer maps each class to one status code.

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

from collections.abc import Sequence


class StateError(Exception):
    """Root of every error the engine raises on purpose."""


class NotFoundError(StateError):
    """The execution (or the requested item of it) does not exist."""


class AlreadyExistsError(StateError):
    """The name is taken."""


class InvalidArgumentError(StateError):
    """The request is malformed; the message names the field or path and the rule."""


class SchemaViolationError(InvalidArgumentError):
    """The candidate state does not validate; `violations` lists `path: message (keyword)` lines."""

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        super().__init__("schema violation: " + "; ".join(self.violations))


class ConflictError(StateError):
    """A stale patch overlaps concurrent changes at paths whose policy is `reject`."""

    def __init__(self, paths: Sequence[str], head_revision: int, reasons: Sequence[str] = ()) -> None:
        self.paths = list(paths)
        self.head_revision = head_revision
        detail = "; ".join(reasons) if reasons else "policy reject"
        super().__init__(
            f"conflict at {', '.join(self.paths)} ({detail}); head is revision {head_revision}: "
            "re-read the state and retry"
        )


class BaseAheadError(StateError):
    """The patch claims a base revision the execution has not reached."""


class OutOfRangeError(StateError):
    """The revision asked for is outside what exists or is still retained."""


class WatcherTooSlowError(StateError):
    """A watch or observation subscriber fell behind its bounded queue and was dropped."""


class LimitExceededError(StateError):
    """A quota was reached (calls in flight, watchers, state size); the message names it and its value."""


class UnauthenticatedError(StateError):
    """The call carries no valid credential."""


class PermissionDeniedError(StateError):
    """The caller's credential does not allow this call, this agent id or a path it writes."""


class StorageError(StateError):
    """The durable log failed; the operation was not acknowledged."""


class StorageFullError(StorageError):
    """The database reached its size cap (`serve --max-db-bytes`) or the disk is full; nothing of the commit
    was written or acknowledged."""


class RolledBackError(StorageError):
    """Not committed: it was merged on a revision whose commit failed (a retry merges it again)."""


class DuplicateRowError(StorageError):
    """A row with the same primary key is already stored; nothing of the batch was committed."""


class CorruptLogError(StorageError):
    """What the log holds for an execution fails its hash chain: it was altered or damaged."""
