"""An execution's past: states and records at any retained revision, from memory or the log.

The window of recent revisions answers most questions; anything older is replayed from the newest
snapshot before it, checking the hash chain as it goes. The path index is extended back the same way.
"""

from __future__ import annotations

from ..errors import OutOfRangeError
from ..storage.records import RevisionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .execution import Execution
from .results import StateView


class Timeline:
    """Reads the past of executions held in memory, falling back to their revision log."""

    def __init__(self, log: RevisionLog) -> None:
        self._log = log

    async def view(self, execution: Execution, revision: int) -> StateView:
        """The state at a committed revision as canonical JSON, from memory or replayed from the log."""
        if revision < execution.compacted:  # even if memory still holds it: what is readable must not vary
            raise OutOfRangeError(
                f"revision {revision} was compacted away; the oldest retained is {execution.compacted}",
                revision=revision,
                oldest_revision=execution.compacted,
            )
        found = execution.entry(revision)
        if found is not None:
            return StateView(revision, canonical.dumps_str(execution.state_at(revision)), found.state_hash)
        snapshot = await self._log.latest_snapshot(execution.id, at_most=revision)
        if snapshot is None:
            raise OutOfRangeError(f"no snapshot at or before revision {revision}")
        records = await self._log.read_revisions(execution.id, after=snapshot.revision, up_to=revision)
        past = _replayed(execution, snapshot, records)
        return StateView(revision, canonical.dumps_str(past.state), past.head.state_hash)

    async def extend(self, execution: Execution, base: int) -> None:
        """Reach the path index back to `base`, older than where it starts (an execution loaded from a
        snapshot after `base`): the log is read from the snapshot before `base` up to where the index starts,
        once, and concurrent callers share it. The index then answers every base from that snapshot on."""
        async with execution.replaying:
            if base >= execution.paths.start:
                return  # extended while this caller waited
            if base < execution.compacted:
                raise compacted_base(execution, base)
            snapshot = await self._log.latest_snapshot(execution.id, at_most=base)
            if snapshot is None:
                raise OutOfRangeError(f"base_revision: no snapshot at or before {base}")
            paths = execution.paths
            records = await self._log.read_revisions(execution.id, after=snapshot.revision, up_to=paths.start)
            if execution.paths is not paths:
                return  # restarted from a newer snapshot meanwhile (a shared log): the caller looks again
            past = Execution(execution.id, execution.schema, execution.created_at, 1, execution.max_base_lag)
            past.policies = execution.policies
            past.recover(snapshot, records)
            paths.prepend(past.paths)

    async def record(self, execution: Execution, revision: int) -> RevisionRecord:
        entry = execution.entry(revision)
        if entry is not None and entry.record is not None:
            return entry.record
        return (await self._log.read_revisions(execution.id, after=revision - 1, up_to=revision))[0]

    async def records(self, execution: Execution, after: int, up_to: int, limit: int) -> list[RevisionRecord]:
        """Committed revisions in (after, up_to], at most limit, from the window when it holds their records.

        The window's first entry may be a snapshot (where it was started: the initial state, or a recovery),
        which holds no record: from there the log is read."""
        if execution.entry(after + 1) is not None:
            start = execution.window[0].revision
            held = [execution.window[i - start].record for i in range(after + 1, min(up_to, after + limit) + 1)]
            records = [record for record in held if record is not None]
            if len(records) == len(held):
                return records
        return await self._log.read_revisions(execution.id, after=after, up_to=up_to, limit=limit)


def _replayed(execution: Execution, snapshot: SnapshotRecord, records: list[RevisionRecord]) -> Execution:
    """The execution's past, rebuilt from a snapshot and the revisions after it (hash chain checked), with
    every one of them kept in its window."""
    past = Execution(execution.id, execution.schema, execution.created_at, window=len(records) + 1)
    past.policies = execution.policies
    past.recover(snapshot, records)
    return past


def compacted_base(execution: Execution, base: int) -> OutOfRangeError:
    """The refusal of a base compacted away: whether memory still holds it or not, as what a read or a merge
    finds must not depend on whether the execution was unloaded since."""
    return OutOfRangeError(
        f"base_revision: {base} was compacted away (the oldest retained is {execution.compacted}); "
        "re-read the state and retry",
        revision=base,
        oldest_revision=execution.compacted,
    )
