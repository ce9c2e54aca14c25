"""One execution in memory: its contract, its head state, its path index, and a window of recent revisions.

The head state is changed in place and each revision in the window keeps its undo (server/engine/undo.py), so a
patch costs what it changes, never the size of the objects it writes into, and the window costs memory in
proportion to what changed. The window serves watch catch-up, history and reads of recent states without
touching storage (anything older is replayed from the log); the path index (paths.py) serves merges.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import CorruptLogError, NotFoundError
from ..limits import DEFAULT_LIMITS
from ..storage.records import RevisionRecord, SnapshotRecord
from . import canonical
from .committer import Pending
from .mergepatch import Path, written_paths
from .ownership import OwnerMap
from .patch_keys import PatchKeys
from .path_index import PathIndex
from .policy import MergePolicy, PolicyMap
from .statesize import size_change, state_bytes
from .undo import Undo, apply_in_place, compose, revert_in_place, reverted
from .validation import SchemaValidator

HASH_DOMAIN = b"skillstate.state.v1"


def genesis_hash(execution_id: str, schema: Any, initial_state: Any) -> str:
    """The hash of revision 0: binds the execution id, its schema and its initial state."""
    return canonical.sha256_hex(
        HASH_DOMAIN, execution_id.encode(), canonical.dumps(schema), canonical.dumps(initial_state)
    )


def revision_hash(
    previous_hash: str, revision: int, agent_id: str, base_revision: int, applied_patch_json: str, action_json: str
) -> str:
    """The hash of a revision: chains the previous hash with everything the revision committed."""
    return canonical.sha256_hex(
        previous_hash.encode(),
        str(revision).encode(),
        agent_id.encode(),
        str(base_revision).encode(),
        applied_patch_json.encode(),
        action_json.encode(),
    )


@dataclass(slots=True)
class Entry:
    """A revision held in memory: its hash, its record, and how to undo it. Never changed (not frozen: one is
    made per patch, and frozen ones cost twice as much)."""

    revision: int
    state_hash: str
    record: RevisionRecord | None
    """None for a snapshot, which stands in for the revisions before it."""
    undo: Undo | None
    """Restores the state before this revision; None where the window starts from a snapshot."""
    size: int = 0
    """Bytes of the state's canonical JSON after this revision (kept for the entries of the window)."""


class Execution:
    """The live state of one execution. Mutated only by the engine, on the event loop."""

    def __init__(
        self,
        execution_id: str,
        schema: dict[str, Any],
        created_at: float,
        window: int,
        max_base_lag: int = DEFAULT_LIMITS.max_base_lag,
    ) -> None:
        self.id = execution_id
        self.schema = schema
        self.created_at = created_at
        self.state: dict[str, Any] = {}
        """The head state, changed in place; window entries hold the undos that lead back from it."""
        self.window: collections.deque[Entry] = collections.deque()
        self.window_size = window
        self.max_base_lag = max_base_lag
        self.paths = PathIndex(0, self._is_text)
        """What each path was written by since `paths.start`: what a merge reads (paths.py)."""
        self.committed = 0
        """The newest revision that is durable; reads and watches never go past it."""
        self.compacted = 0
        self.epoch = 0
        """Bumped when a failed commit rolls pending revisions back, orphaning work merged on them."""
        self.lease_epoch: int | None = None
        """On a shared log with leases, the epoch of this replica's lease on it: every commit is fenced by it."""
        self.keys = PatchKeys()
        """The idempotency keys of the revisions the log retains (patch_keys.py)."""
        self.pending_patches: dict[tuple[str, str], Pending[Execution]] = {}
        """Idempotency keys of revisions merged but not yet durable -> their place in the group commit."""
        self.replaying = asyncio.Lock()
        """One reading back of the log at a time (Timeline.extend): many agents stale on one base share one."""
        self.refreshing = asyncio.Lock()
        """Held while catching up with what other servers committed (a shared log)."""
        self.refresh_requests = 0
        self.refreshed_through = 0
        """Catch-ups asked for, and the last of them a finished catch-up began after: the calls waiting
        behind one catch-up share the next, as commits share a group commit."""
        self.users = 0
        """Calls, streams and consumer groups using it: while any does, it stays in memory (executions.py)."""
        self.deleted = False
        """Set by DeleteExecution: nothing more is merged or published into it while its rows are deleted."""
        self.observation_sequence = 0
        """The last sequence handed out, durable or pending."""
        self.observation_committed = 0
        self._settle_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @functools.cached_property
    def validator(self) -> SchemaValidator:
        return SchemaValidator(self.schema)

    @functools.cached_property
    def policies(self) -> PolicyMap:
        return PolicyMap(self.schema)

    @functools.cached_property
    def owners(self) -> OwnerMap:
        """Compiled on first use, as are `validator` and `policies`: an execution that only replays the log
        (recovery, reads of the past) never needs them."""
        return OwnerMap(self.schema)

    def _is_text(self, path: Path) -> bool:
        return self.policies.policy_at(path) is MergePolicy.TEXT

    @property
    def oldest_base(self) -> int:
        """The oldest base a patch may have now: none before the compact revision or over the lag limit."""
        return max(self.compacted, self.committed - self.max_base_lag)

    def compile(self) -> None:
        """Compile the contract now, so that a new execution's bad schema is refused when it is created."""
        _ = self.validator, self.policies, self.owners

    def refuse_if_deleted(self) -> None:
        """Raise NotFoundError once a delete began: nothing more is merged or published into it, and a stream
        that subscribes after the delete ended the others must not wait for it forever."""
        if self.deleted:
            raise NotFoundError(f"execution {self.id!r} was deleted")

    @property
    def pending(self) -> bool:
        """Whether a revision or an observation is merged or published here but not durable yet."""
        return self.head.revision != self.committed or self.observation_sequence != self.observation_committed

    @property
    def head(self) -> Entry:
        return self.window[-1]

    def begin(self, revision: int, state: dict[str, Any], state_hash: str) -> None:
        """Start the (empty) window and the path index at a revision whose state is known: the initial state
        or a snapshot."""
        self.state = state
        self.paths = PathIndex(revision, self._is_text)
        self.push(Entry(revision, state_hash, None, None, state_bytes(state)))

    def restart_from(self, snapshot: SnapshotRecord, records: Iterable[RevisionRecord]) -> None:
        """Start over from a snapshot newer than the head (a shared log compacted past this server's head),
        then catch up. The head must be durable; idempotency keys older than the snapshot are looked up."""
        assert self.head.revision == self.committed, "restart only from a durable head"
        self.window.clear()
        self.keys.restart(snapshot.revision + 1)
        self.recover(snapshot, records)

    def recover(self, snapshot: SnapshotRecord, records: Iterable[RevisionRecord]) -> None:
        """Rebuild head and window from a snapshot and every revision after it, checking the hash chain."""
        self.begin(snapshot.revision, orjson.loads(snapshot.state_json), snapshot.state_hash)
        self.mark_committed(snapshot.revision)
        self.catch_up(records)

    def catch_up(self, records: Iterable[RevisionRecord]) -> list[RevisionRecord]:
        """Apply durable revisions that follow the head (committed elsewhere: at recovery, by another server
        on a shared log, or read back to replay the past), checking the hash chain; returns those applied.
        Revisions the head already holds are skipped: this server may have committed them while the caller
        read the log. The head must be durable."""
        assert self.head.revision == self.committed, "catch up only from a durable head"
        applied_records = []
        for record in records:
            if record.revision <= self.head.revision:
                continue
            if record.revision != self.head.revision + 1:
                raise CorruptLogError(f"execution {self.id!r}: revision {record.revision} follows {self.head.revision}")
            expected = revision_hash(
                self.head.state_hash, record.revision, record.agent_id, record.base_revision,
                record.applied_patch_json, record.action_json,
            )  # fmt: skip
            if expected != record.state_hash:
                raise CorruptLogError(
                    f"execution {self.id!r}: hash chain broken at revision {record.revision}; "
                    "the log was altered or corrupted"
                )
            self.advance(record, orjson.loads(record.applied_patch_json), orjson.loads(record.patch_json), durable=True)
            applied_records.append(record)
        if applied_records:
            self.mark_committed(self.head.revision)
        return applied_records

    def advance(
        self,
        record: RevisionRecord,
        applied: dict[str, Any],
        submitted: dict[str, Any],
        check: Callable[[Undo, int], None] | None = None,
        *,
        durable: bool = False,
    ) -> None:
        """Make `record` the head: apply its effective patch in place, keep the undo in the window and index
        what it wrote. The one way the head moves forward, for a new commit and for revisions read back from
        the log (`durable`) alike.

        `check` sees the undo and the new state's size; if it raises (a new commit the schema or a limit
        refuses), the state is reverted and the head stays where it was.
        """
        state = self.state
        touched = written_paths(state, applied, submitted)
        undo = apply_in_place(state, applied)
        size = self.head.size + size_change(state, undo)
        if check is not None:
            try:
                check(undo, size)
            except BaseException:
                revert_in_place(state, undo)
                raise
        stamp = (record.base_revision, record.agent_id)
        self.paths.record(record.revision, stamp, record.client_patch_id, submitted, touched, undo, durable=durable)
        self.push(Entry(record.revision, record.state_hash, record, undo, size))

    def state_at(self, revision: int) -> dict[str, Any]:
        """The state at a revision the window holds. At head this is the live state: use it before any await."""
        if revision == self.head.revision:
            return self.state
        return reverted(self.state, compose(self._undos_after(revision)))

    def _undos_after(self, revision: int) -> Iterator[Undo]:
        """The undos of the revisions after `revision` (held by the window), newest first."""
        window, first = self.window, self.window[0].revision
        for index in range(len(window) - 1, revision - first, -1):
            undo = window[index].undo
            assert undo is not None, "only the first entry of the window lacks an undo"
            yield undo

    def push(self, entry: Entry) -> None:
        """Add the next revision (durable or pending) at the head."""
        self.window.append(entry)
        if entry.record is not None and entry.record.client_patch_id:
            self.keys.add((entry.record.agent_id, entry.record.client_patch_id), entry.revision)

    def entry(self, revision: int) -> Entry | None:
        """The window's entry for a revision, or None if the window does not hold it."""
        first = self.window[0].revision
        if first <= revision <= self.head.revision:
            found = self.window[revision - first]
            return found if found.revision == revision else None
        return None

    async def settled(self, revision: int) -> None:
        """Return once `revision` is durable, or rolled back by a failed commit: either way a read then shows
        what became of it (a patch that lost a conflict to it is answered only then)."""
        if revision <= self.committed:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._settle_waiters.append((revision, waiter))
        await waiter

    def _release_waiters(self, up_to: int | None) -> None:
        """Wake the waiters for revisions up to `up_to` (all of them for None)."""
        waiting = []
        for revision, waiter in self._settle_waiters:
            if up_to is None or revision <= up_to:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                waiting.append((revision, waiter))
        self._settle_waiters = waiting

    def mark_committed(self, revision: int) -> None:
        """Record that revisions up to `revision` are durable, and trim the window behind them."""
        self.committed = max(self.committed, revision)
        self.paths.committed(self.committed)
        self.paths.fold(self.oldest_base)
        if self._settle_waiters:
            self._release_waiters(self.committed)
        while len(self.window) > self.window_size and self.window[0].revision < self.committed:
            self.window.popleft()

    def key_unused(self, key: tuple[str, str]) -> bool:
        """Whether no submit used this idempotency key, as far as memory can tell without the log."""
        return key not in self.pending_patches and self.keys.unused(key)

    def untouched_since(self, base: int, patch: dict[str, Any]) -> bool:
        """True if no revision after `base` wrote under any member `patch` writes (the index reaching `base`).

        Every path starts with a top-level member, so such a patch overlaps no write since its base, and the
        merge would apply it as it is.
        """
        return base >= self.paths.start and self.paths.untouched_since(base, patch)

    def rollback(self) -> None:
        """Forget every revision that is not durable (after a failed commit)."""
        while self.window and self.head.revision > self.committed:
            dropped = self.window.pop()
            if dropped.undo is not None:
                revert_in_place(self.state, dropped.undo)
            if dropped.record is not None:
                self.keys.discard((dropped.record.agent_id, dropped.record.client_patch_id))
        self.paths.rollback(self.committed)
        self.pending_patches.clear()
        self.observation_sequence = self.observation_committed
        self.epoch += 1
        self._release_waiters(None)
