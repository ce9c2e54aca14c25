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
    snapshot_every: int = 1000
    """A snapshot is stored every this many revisions, bounding recovery and old-state reads."""
    subscriber_queue: int = 1024
    """Items a watcher or observation stream may fall behind before it is ended."""
    max_watchers: int = 1024
    """Watch streams per execution, and observation streams per execution: one more is RESOURCE_EXHAUSTED."""
    max_batch: int = 1024
    """Most items in one group commit."""
    retain_revisions: int | None = None
    """Keep at least this many revisions of history; older ones are compacted into a snapshot after each
    snapshot commits. None keeps the whole log."""
