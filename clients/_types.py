"""The values the client returns, decoded from the wire messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from skillstate.state.v1 import state_pb2 as pb

JSON = Any


@dataclass(frozen=True, slots=True)
class CreatedExecution:
    execution_id: str
    revision: int
    state_hash: str


@dataclass(frozen=True, slots=True)
class State:
    """An execution's state at one revision."""

    revision: int
    state: dict[str, JSON]
    state_hash: str


@dataclass(frozen=True, slots=True)
class StateJSON:
    """An execution's state at one revision as the server's canonical JSON text (sorted keys, no spaces), not
    decoded: for a proxy that passes it on."""

    revision: int
    state_json: str
    state_hash: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one concurrently written path was merged: policy and outcome are lower-case names."""

    path: str
    policy: str
    outcome: str

    @classmethod
    def from_pb(cls, message: pb.Resolution) -> Resolution:
        policy = pb.MergePolicy.Name(message.policy).removeprefix("MERGE_POLICY_").lower()
        outcome = pb.ResolutionOutcome.Name(message.outcome).removeprefix("RESOLUTION_OUTCOME_").lower()
        return cls(message.path, policy, outcome)


@dataclass(frozen=True, slots=True)
class PatchResult:
    """A committed patch: its revision, hash, the effective change, and how conflicts were resolved."""

    revision: int
    state_hash: str
    applied_patch: dict[str, JSON]
    resolutions: tuple[Resolution, ...]
    duplicate: bool

    @classmethod
    def from_pb(cls, message: pb.SubmitPatchResponse) -> PatchResult:
        return cls(
            message.revision,
            message.state_hash,
            json.loads(message.applied_patch_json),
            tuple(Resolution.from_pb(r) for r in message.resolutions),
            message.duplicate,
        )


@dataclass(frozen=True, slots=True)
class RevisionEvent:
    """One committed revision, as Watch and GetHistory report it."""

    revision: int
    agent_id: str
    base_revision: int
    applied_patch: dict[str, JSON]
    action: JSON
    state_hash: str
    commit_time: datetime
    client_patch_id: str
    resolutions: tuple[Resolution, ...]

    @classmethod
    def from_pb(cls, message: pb.RevisionEvent) -> RevisionEvent:
        return cls(
            message.revision,
            message.agent_id,
            message.base_revision,
            json.loads(message.applied_patch_json),
            json.loads(message.action_json) if message.action_json else None,
            message.state_hash,
            message.commit_time.ToDatetime(tzinfo=UTC),
            message.client_patch_id,
            tuple(Resolution.from_pb(r) for r in message.resolutions),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The whole state, sent first by a watch whose starting point was compacted away."""

    revision: int
    state: dict[str, JSON]
    state_hash: str
    compact_revision: int


@dataclass(frozen=True, slots=True)
class ExecutionSummary:
    """An execution as ListExecutions describes it."""

    execution_id: str
    head_revision: int
    create_time: datetime
    update_time: datetime | None
    """When its head revision was committed (its creation while it has none); None when its history was
    compacted away up to the head."""
    agents: tuple[str, ...]
    """Agents that committed a revision of it, at most 100 (agent_count says how many in all)."""
    agent_count: int
    compact_revision: int

    @classmethod
    def from_pb(cls, message: pb.ExecutionSummary) -> ExecutionSummary:
        return cls(
            message.execution_id,
            message.head_revision,
            message.create_time.ToDatetime(tzinfo=UTC),
            message.update_time.ToDatetime(tzinfo=UTC) if message.HasField("update_time") else None,
            tuple(message.agents),
            message.agent_count,
            message.compact_revision,
        )


@dataclass(frozen=True, slots=True)
class ExecutionPage:
    executions: list[ExecutionSummary]
    next_page_token: str
    """Empty when there are no more; a page may hold fewer than asked for where the caller may not read some."""


@dataclass(frozen=True, slots=True)
class HistoryPage:
    revisions: list[RevisionEvent]
    next_page_token: str
    head_revision: int
    compact_revision: int


@dataclass(frozen=True, slots=True)
class Observation:
    sequence: int
    to: str
    source: str
    kind: str
    payload: JSON
    publish_time: datetime
    delivery: int = 0
    """How often a consumer group delivered it, this time included (0: not delivered by a group)."""

    @classmethod
    def from_pb(cls, message: pb.Observation) -> Observation:
        return cls(
            message.sequence,
            message.to,
            message.source,
            message.kind,
            json.loads(message.payload_json),
            message.publish_time.ToDatetime(tzinfo=UTC),
            message.delivery,
        )
