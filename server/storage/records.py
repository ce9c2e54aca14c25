"""What the stores keep, as plain immutable values shared by every backend: the rows of the revision log,
skill versions and credentials; and the column order both SQL backends write the log's rows in."""

from __future__ import annotations

import enum
import fnmatch
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """An execution's identity and contract; its revision 0 is the snapshot stored beside it."""

    execution_id: str
    schema_json: str
    created_at: float


@dataclass(frozen=True, slots=True)
class RevisionRecord:
    """One committed revision: who wrote what against which base, and what it changed."""

    execution_id: str
    revision: int
    agent_id: str
    base_revision: int
    patch_json: str
    """The patch as submitted (canonical JSON): the intent, replayed by `text` merges."""
    applied_patch_json: str
    """The effective change on the previous revision (canonical JSON): what replay applies."""
    action_json: str
    client_patch_id: str
    resolutions_json: str
    state_hash: str
    committed_at: float


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """The whole state at one revision, which bounds recovery and stands in for compacted history."""

    execution_id: str
    revision: int
    state_json: str
    state_hash: str


@dataclass(frozen=True, slots=True)
class ObservationRecord:
    """One observation, numbered within its execution."""

    execution_id: str
    sequence: int
    to: str
    source: str
    kind: str
    payload_json: str
    published_at: float


@dataclass(frozen=True, slots=True)
class ExecutionSummary:
    """An execution as a listing shows it: its identity, its head, and who wrote to it."""

    execution_id: str
    created_at: float
    head_revision: int
    updated_at: float | None
    """When its head revision was committed (created_at while it has none); None when its history was
    compacted away up to the head."""
    agents: tuple[str, ...]
    """Agents that committed a revision of it, by id, at most MAX_LISTED_AGENTS."""
    agent_count: int
    compact_revision: int


MAX_LISTED_AGENTS = 100
"""Agents an ExecutionSummary names at most (agent_count says how many there are)."""


@dataclass(frozen=True, slots=True)
class StoredExecution:
    """What recovering an execution reads from the log (RevisionLog.load_execution)."""

    record: ExecutionRecord
    compacted: int
    """Revisions up to this one were compacted away."""
    snapshot: SnapshotRecord
    """The newest snapshot."""
    revisions: list[RevisionRecord]
    """Every revision after the snapshot, ascending."""
    patch_ids: list[tuple[str, str, int]]
    """(agent_id, client_patch_id, revision) of the newest revisions up to the snapshot committed under an
    idempotency key, newest first, as many as asked for."""
    last_observation: int
    """The greatest observation sequence stored (0 when none)."""


@dataclass(slots=True)
class Batch:
    """Everything one group commit makes durable, atomically."""

    revisions: list[RevisionRecord] = field(default_factory=list)
    snapshots: list[SnapshotRecord] = field(default_factory=list)
    observations: list[ObservationRecord] = field(default_factory=list)
    fence: dict[str, int] = field(default_factory=dict)
    """Execution id -> the lease epoch its writer holds (server/storage/revision_log/leases.py): a shared log
    commits nothing of the batch unless each is still the epoch of that execution's lease, held by this
    replica (FencedError). Empty on a log of one server's own."""

    def __bool__(self) -> bool:
        return bool(self.revisions or self.snapshots or self.observations)


EXECUTION_COLUMNS = ("execution_id", "schema_json", "created_at")
REVISION_COLUMNS = (
    "execution_id", "revision", "agent_id", "base_revision", "patch_json", "applied_patch_json", "action_json",
    "client_patch_id", "resolutions_json", "state_hash", "committed_at",
)  # fmt: skip
SNAPSHOT_COLUMNS = ("execution_id", "revision", "state_json", "state_hash")
OBSERVATION_COLUMNS = ("execution_id", "sequence", "to_address", "source", "kind", "payload_json", "published_at")


def execution_row(e: ExecutionRecord) -> tuple[Any, ...]:
    """The record's values in EXECUTION_COLUMNS order."""
    return (e.execution_id, e.schema_json, e.created_at)


def revision_row(r: RevisionRecord) -> tuple[Any, ...]:
    """The record's values in REVISION_COLUMNS order."""
    return (
        r.execution_id, r.revision, r.agent_id, r.base_revision, r.patch_json, r.applied_patch_json,
        r.action_json, r.client_patch_id, r.resolutions_json, r.state_hash, r.committed_at,
    )  # fmt: skip


def snapshot_row(s: SnapshotRecord) -> tuple[Any, ...]:
    return (s.execution_id, s.revision, s.state_json, s.state_hash)


def observation_row(o: ObservationRecord) -> tuple[Any, ...]:
    return (o.execution_id, o.sequence, o.to, o.source, o.kind, o.payload_json, o.published_at)


@dataclass(frozen=True)
class SkillVersion:
    """One registered version of a skill package, with every file it was registered with."""

    name: str
    version: int
    digest: str
    folder: str
    registered_at: float
    files: Mapping[str, bytes] = field(repr=False)
    removed_at: float | None = None


@dataclass(frozen=True)
class StoredHydration:
    """A hydration the skill store keeps for Expand and ReportOutcome: what the registry recorded of it (JSON,
    opaque to the store) and the macros expanded from it since."""

    hydration_id: str
    record_json: str
    expanded: frozenset[str] = frozenset()


Counts = tuple[int, int, int]
"""A macro key's execution evidence since it was last revised: (uses, expansions, verifier failures)."""


class Right(enum.Enum):
    """What a credential may do. The first four apply to the executions it names."""

    READ = "read"
    """GetState, Watch, GetHistory, StreamObservations."""
    WRITE = "write"
    """SubmitPatch; ReportOutcome to the skill registry."""
    PUBLISH = "publish"
    """PublishObservation."""
    ADMIN = "admin"
    """CreateExecution, Compact."""
    REGISTRY = "registry"
    """RegisterSkill, RemoveSkill (the library is shared by every execution)."""


DEFAULT_RIGHTS = frozenset({Right.READ, Right.WRITE})


@dataclass(frozen=True, slots=True)
class Credential:
    """One issued token, without its secret (server/auth/credentials.py issues them)."""

    token_id: str
    agent: str
    """The identity every call made with the token carries: its agent_id, whatever the request claims."""
    executions: tuple[str, ...]
    """Execution ids the token's rights apply to; shell-style patterns (`order-*`, `*`)."""
    skills: tuple[str, ...]
    """Skills the agent runs: it receives observations sent to `skill:NAME` and owns paths owned by it."""
    rights: frozenset[Right] = DEFAULT_RIGHTS
    issued_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    revoked_at: float | None = None

    def covers(self, execution_id: str) -> bool:
        return any(fnmatch.fnmatchcase(execution_id, pattern) for pattern in self.executions)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at
