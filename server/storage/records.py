"""The rows of the durable log, as plain immutable values shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(slots=True)
class Batch:
    """Everything one group commit makes durable, atomically."""

    revisions: list[RevisionRecord] = field(default_factory=list)
    snapshots: list[SnapshotRecord] = field(default_factory=list)
    observations: list[ObservationRecord] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.revisions or self.snapshots or self.observations)
