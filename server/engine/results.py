"""What the engine returns: plain values the gRPC layer copies into replies."""

from __future__ import annotations

from dataclasses import dataclass

from ..storage.records import ExecutionSummary, RevisionRecord
from .merge import Resolution


@dataclass(frozen=True, slots=True)
class Created:
    execution_id: str
    revision: int
    state_hash: str


@dataclass(frozen=True, slots=True)
class StateView:
    revision: int
    state_json: str
    state_hash: str


@dataclass(slots=True)
class SubmitResult:
    """What a submit committed. Never changed (not frozen: one is made per patch)."""

    revision: int
    state_hash: str
    applied_patch_json: str
    resolutions: tuple[Resolution, ...]
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ExecutionPage:
    executions: list[ExecutionSummary]
    more: bool
    """Whether executions after the last of this page match too."""


@dataclass(frozen=True, slots=True)
class HistoryPage:
    revisions: list[RevisionRecord]
    more: bool
    """Whether revisions after the last of this page are in the range asked for."""
    head_revision: int
    compact_revision: int


@dataclass(frozen=True, slots=True)
class WatchSnapshot:
    """Sent first by a watch whose starting point was compacted away."""

    revision: int
    state_json: str
    state_hash: str
    compact_revision: int


@dataclass(frozen=True, slots=True)
class WatchProgress:
    """Sent by a caught-up watch after `EngineConfig.progress_interval` seconds without anything else: every
    revision after the watch's starting point, up to head_revision, has been sent."""

    head_revision: int
