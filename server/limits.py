"""Explicit limits on what a request may carry, documented in docs/limits.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds checked before anything is applied; a request over one is refused with the rule named."""

    max_json_bytes: int = 1 << 20
    """Largest patch, action, payload or initial state, in UTF-8 bytes."""
    max_schema_bytes: int = 256 << 10
    """Largest JSON Schema."""
    max_depth: int = 64
    """Deepest nesting of objects and arrays in any JSON document."""
    max_id_length: int = 128
    """Longest execution id, agent id, client patch id or observation address."""
    max_history_page: int = 1000
    """Most revisions in one GetHistory page."""
    max_base_lag: int = 100_000
    """Most revisions a patch's base may be behind head: merging costs what changed since the base."""
    max_message_bytes: int = 4 << 20
    """Largest gRPC message either way."""
    max_state_bytes: int = (4 << 20) - (4 << 10)
    """Largest state, as canonical JSON: it must fit in one GetState reply."""
    max_text_diff_cells: int = 25_000_000
    """Most work one `text` merge may spend diffing its edits from the original (server/engine/textdiff.py):
    about 0.4 s of a worker thread in the worst case."""
    max_text_merge_edits: int = 10_000
    """Most character edits one `text` merge replays into the CRDT, all writers together."""


DEFAULT_LIMITS = Limits()
