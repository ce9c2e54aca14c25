"""The engine's tuning knobs; docs/limits.md describes each."""

from __future__ import annotations

from dataclasses import dataclass

from ..limits import DEFAULT_LIMITS, Limits


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Tuning knobs; docs/limits.md describes each."""

    limits: Limits = DEFAULT_LIMITS
    window: int = 256
    """Recent revisions kept in memory per execution (older bases are replayed from the log)."""
    max_loaded_executions: int | None = 10_000
    """Executions kept in memory beyond those in use; idle ones beyond it are unloaded, least recently used
    first, and loaded again from the log when next used. None: never unload."""
    snapshot_every: int = 1000
    """A snapshot is stored every this many revisions, bounding recovery and old-state reads."""
    subscriber_queue: int = 1024
    """Items a watcher or observation stream may fall behind before it is ended."""
    max_watchers: int = 1024
    """Watch streams per execution, and observation streams per execution: one more is RESOURCE_EXHAUSTED."""
    max_batch: int = 1024
    """Most items in one group commit."""
    ack_deadline: float = 30.0
    """Seconds a consumer group's member may hold an observation unacknowledged before another member gets
    it, unless the group's first member asked for another deadline."""
    group_idle: float = 300.0
    """Seconds a consumer group without members is kept (with what it holds) before it is dropped."""
    progress_interval: float = 10.0
    """Seconds a Watch or Session stream may go without a message before it is sent a progress message."""
    max_stream_in_flight: int = 64
    """Submits one Session stream may have unanswered; the server reads no more of the stream until one is
    answered (gRPC flow control then holds the client back)."""
    retain_revisions: int | None = None
    """Keep at least this many revisions of history; older ones are compacted into a snapshot after each
    snapshot commits. None keeps the whole log."""
    lease_seconds: float | None = 3.0
    """On a shared log (PostgreSQL replicas): how long an execution's owner keeps its lease after its last
    heartbeat, so how soon another replica takes over from one that died. None: no leases, every replica
    serves every execution and commits to it, racing the others for revision numbers."""
