"""The state engine: executions, revisions, merges, durability and fan-out, with no knowledge of gRPC.

Every mutation of an execution happens synchronously on the event loop between two awaits, so the merge
of one patch always sees the head left by the previous one; durability is the group committer's job, and
a caller is answered only after its revision is committed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    DuplicateRowError,
    InvalidArgumentError,
    LimitExceededError,
    OutOfRangeError,
    RolledBackError,
    StorageError,
)
from ..limits import Limits
from ..metrics import NO_METRICS, Metrics
from ..storage.records import ObservationRecord, RevisionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .committer import GroupCommitter, Pending
from .config import EngineConfig
from .execution import Execution, genesis_hash, revision_hash
from .executions import Executions
from .hub import Hub, follow
from .merge import Change, Resolution, decode_resolutions, encode_resolutions, merge
from .mergepatch import NoChange, effective, path_of, strip_nulls
from .observations import Observations
from .policy import MergePolicy
from .replicas import Replicas
from .requests import Submission, check_execution_id, new_execution_id
from .results import Created, HistoryPage, StateView, SubmitResult, WatchSnapshot
from .textmerge import Deferred, TextMerges
from .timeline import Timeline
from .undo import Undo

log = logging.getLogger(__name__)

PAGE_MARGIN = 64 << 10
"""Bytes of a GetHistory reply kept for what is not the revisions' JSON (framing, ids, hashes)."""
MAX_COMMIT_RACES = 100
"""How often a patch is merged again after another server's commit beat it, before UNAVAILABLE."""


class StateEngine:
    """Holds every execution; create with a RevisionLog, `await start()`, and `await close()` at the end."""

    def __init__(
        self,
        log: RevisionLog,
        config: EngineConfig = EngineConfig(),
        metrics: Metrics = NO_METRICS,
        worker: concurrent.futures.Executor | None = None,
    ) -> None:
        """`worker` runs heavy work (large text merges) off the event loop; by default a thread of its own."""
        self._log = log
        self._metrics = metrics
        self._config = config
        self._limits = config.limits
        self._executions = Executions(log, config.window)
        self._revisions: Hub[RevisionRecord] = Hub(config.subscriber_queue, config.max_watchers, "watchers")
        self._committer: GroupCommitter[Execution] = GroupCommitter(
            log, self._committed, self._rolled_back, config.max_batch, metrics
        )
        self._timeline = Timeline(log)
        self._texts = TextMerges(config.limits, worker)
        self._observations = Observations(
            log, self._committer, config.limits, config.subscriber_queue, config.max_watchers
        )
        self._compactions: set[asyncio.Task[int]] = set()
        self._replicas = Replicas(log, self._executions.loaded, self._revisions, self._observations)
        metrics.watch_gauges(
            watchers=self._revisions.count,
            observation_streams=self._observations.stream_count,
            commit_queue_depth=lambda: self._committer.queue_depth,
            executions_loaded=lambda: len(self._executions.loaded),
        )

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the log and list its executions; each is recovered from the log on first use."""
        await self._log.open()
        try:
            await self._executions.start()
        except BaseException:
            await self._log.close()
            raise
        self._committer.start()
        self._replicas.start()

    async def close(self) -> None:
        """Commit what is pending, finish compactions, then close the log."""
        await self._replicas.close()
        await self._committer.close()
        await asyncio.gather(*self._compactions, return_exceptions=True)
        self._texts.close()
        await self._log.close()

    # -- executions and reads ----------------------------------------------------------------------------

    async def create_execution(
        self,
        execution_id: str,
        schema_json: str,
        initial_state_json: str,
        check_id: Callable[[str], None] | None = None,
    ) -> Created:
        """Create an execution, choosing its id when `execution_id` is empty; `check_id` may refuse the id
        (by raising) before anything is created."""
        limits = self._limits
        execution_id = check_execution_id(execution_id, limits) if execution_id else new_execution_id()
        if check_id is not None:
            check_id(execution_id)
        # parsing, compiling the schema and validating a 1 MiB state take a second at the limits: in a thread
        execution, state, genesis = await asyncio.to_thread(
            _new_execution, execution_id, schema_json, initial_state_json, limits, self._config.window
        )
        await self._executions.create(execution, genesis)
        execution.begin(0, state, genesis.state_hash)
        return Created(execution_id, 0, genesis.state_hash)

    async def head_revision(self, execution_id: str) -> int:
        return (await self._executions.get(execution_id)).committed

    async def get_state(self, execution_id: str, at_revision: int | None = None) -> StateView:
        execution = await self._executions.get(execution_id)
        if at_revision is None or at_revision > execution.committed:
            await self._replicas.refresh(execution)  # linearizable: nothing another server acknowledged is missed
        revision = execution.committed if at_revision is None else at_revision
        if not 0 <= revision <= execution.committed:
            raise OutOfRangeError(f"at_revision: {revision} is outside 0..{execution.committed} (the head)")
        return await self._timeline.view(execution, revision)

    # -- patches -----------------------------------------------------------------------------------------

    async def submit_patch(
        self,
        execution_id: str,
        agent_id: str,
        base_revision: int,
        patch_json: str,
        client_patch_id: str = "",
        action_json: str = "",
        writer_skills: frozenset[str] = frozenset(),
    ) -> SubmitResult:
        """Merge, validate and durably commit one patch; see docs/merge.md for the semantics. The paths it
        writes must be owned by agent_id or one of writer_skills where the schema declares owners.

        On a shared log, a commit that another server's commit beat (the same revision number) is merged
        again on the state caught up from the log, as often as it takes."""
        execution = await self._executions.get(execution_id)
        submission = Submission.check(agent_id, base_revision, patch_json, client_patch_id, action_json, self._limits)
        execution.owners.check(submission.patch, submission.agent_id, writer_skills)
        execution.policies.check_values(submission.patch, "patch_json")
        for attempt in itertools.count(1):
            try:
                return await self._submit(execution, submission)
            except (DuplicateRowError, RolledBackError):
                if not self._log.shared or attempt == MAX_COMMIT_RACES:
                    raise
                await self._replicas.refresh(execution)
        raise AssertionError("unreachable")

    async def _submit(self, execution: Execution, submission: Submission) -> SubmitResult:
        base_revision, client_patch_id = submission.base_revision, submission.client_patch_id
        if base_revision > execution.committed:
            await self._replicas.refresh(execution)  # the agent may have read it from another server
        if base_revision > execution.committed:
            raise BaseAheadError(f"base_revision: {base_revision} is ahead of the head revision {execution.committed}")
        lag, limit = execution.committed - base_revision, self._limits.max_base_lag
        if lag > limit:
            raise OutOfRangeError(
                f"base_revision: {base_revision} is {lag} revisions behind the head {execution.committed}, "
                f"more than the limit of {limit}: re-read the state and retry"
            )
        while (merged := await self._merge(execution, submission)) is None:
            pass  # merge again, on the head as it is now (see _merge)
        if isinstance(merged, SubmitResult):
            return merged  # the same idempotency key was committed before
        applied, resolutions = merged
        record, pending = self._append(execution, submission, applied, resolutions)
        if client_patch_id:
            execution.pending_patches[submission.key] = pending
        await pending.future
        return SubmitResult(record.revision, record.state_hash, record.applied_patch_json, tuple(resolutions))

    async def _merge(
        self, execution: Execution, submission: Submission
    ) -> tuple[dict[str, Any], list[Resolution]] | SubmitResult | None:
        """The patch merged into head, ready to append with no await in between; the earlier result when
        its idempotency key was used before; None when a large text merge had to be computed off the loop
        first, or when the revisions the patch conflicted with were rolled back by a failed commit (the
        caller merges again, on the head as it is then)."""
        base_revision = submission.base_revision
        while True:
            if submission.client_patch_id:
                earlier = await self._earlier_result(execution, submission)
                if earlier is not None:
                    return earlier
            if execution.untouched_since(base_revision, submission.patch):
                return _effective(execution.state, submission.patch), []  # nothing to merge with
            since_base = self._timeline.changes_since(execution, base_revision, submission.patch.keys())
            if since_base is None:
                await self._timeline.replay_to(execution, base_revision)  # then look again: the window moved on
                continue
            lww_history = self._lww_history(execution, submission, since_base)
            if not isinstance(lww_history, int):
                break
            await self._timeline.replay_to(execution, lww_history)
        # From here to enqueue there is no await: the merge sees exactly the head it commits on.
        try:
            result = merge(
                base=since_base[0],
                head=execution.state,
                head_revision=execution.committed,
                changes=since_base[1],
                patch=submission.patch,
                stamp=(base_revision, submission.agent_id),
                policies=execution.policies,
                client_patch_id=submission.client_patch_id,
                texts=self._texts,
                lww_history=lww_history,
            )
        except Deferred as deferred:
            await self._texts.run(deferred)
            return None
        except ConflictError as conflict:  # answered once the revisions it lost to are durable: a re-read sees them
            epoch = execution.epoch
            await execution.settled(execution.head.revision)
            if execution.epoch != epoch:
                return None  # a failed commit rolled back what it lost to: merge again, on the durable head
            self._metrics.conflict([execution.policies.policy_at(path_of(p)).value for p in conflict.paths])
            raise
        for resolution in result.resolutions:
            self._metrics.resolved(resolution.policy.value, resolution.outcome.lower())
        return result.applied_patch, result.resolutions

    def _lww_history(
        self, execution: Execution, submission: Submission, since_base: tuple[dict[str, Any], list[Change]]
    ) -> tuple[dict[str, Any], list[Change]] | int | None:
        """Where an lww merge of the patch must start (merge.py explains why): None when at the patch's own
        base; else the state at the earliest base B* that no later write to the patch's members undercuts,
        with the changes since it; or B* itself, when the log must be replayed to reach it first."""
        keys = {key for key in submission.patch if execution.policies.reaches(MergePolicy.LWW, key)}
        if not keys:
            return None
        base, history = submission.base_revision, since_base
        while True:
            writes = [c for c in history[1] if any(path[0] in keys for path in c.touched)]
            earliest = min((c.base_revision for c in writes), default=base)
            if earliest >= base:
                return None if base == submission.base_revision else history
            base = earliest
            found = self._timeline.changes_since(execution, base, keys)
            if found is None:
                return base
            history = found

    def _append(
        self, execution: Execution, submission: Submission, applied: dict[str, Any], resolutions: list[Resolution]
    ) -> tuple[RevisionRecord, Pending[Execution]]:
        """Make a merged patch the next revision and queue it for commit: all or nothing."""
        self._committer.check_open()
        revision, agent_id, base_revision = execution.head.revision + 1, submission.agent_id, submission.base_revision
        applied_json = canonical.dumps_str(applied)  # before the head changes: `applied` may share its objects
        state_hash = revision_hash(
            execution.head.state_hash, revision, agent_id, base_revision, applied_json, submission.action_json
        )
        record = RevisionRecord(
            execution_id=execution.id,
            revision=revision,
            agent_id=agent_id,
            base_revision=base_revision,
            patch_json=submission.patch_json,
            applied_patch_json=applied_json,
            action_json=submission.action_json,
            client_patch_id=submission.client_patch_id,
            resolutions_json=encode_resolutions(resolutions),
            state_hash=state_hash,
            committed_at=time.time(),
        )

        def admit(undo: Undo, size: int) -> None:
            if size > self._limits.max_state_bytes:
                raise LimitExceededError(
                    f"state size: this patch would make the state {size:,} bytes, over the limit of "
                    f"{self._limits.max_state_bytes:,}"
                )
            execution.validator.validate_change(execution.state, applied, undo)

        execution.advance(record, applied, submission.patch, admit)
        snapshot = None
        if revision % self._config.snapshot_every == 0:
            snapshot = SnapshotRecord(execution.id, revision, canonical.dumps_str(execution.state), state_hash)
        pending = Pending(execution, execution.epoch, revision=record, snapshot=snapshot)
        self._committer.enqueue(pending)
        return record, pending

    async def _earlier_result(self, execution: Execution, submission: Submission) -> SubmitResult | None:
        """The result of an earlier submit under the same idempotency key, or None if there was none.

        Returns None only right after checking memory with no await since, so the caller can merge at once.
        """
        key = submission.key
        while True:
            pending = execution.pending_patches.get(key)
            if pending is not None:
                with contextlib.suppress(StorageError):  # if the original never committed, this one may apply
                    await pending.follow()
                continue
            revision = execution.patch_ids.get(key)
            if revision is not None:
                return _duplicate(await self._timeline.record(execution, revision), submission)
            if execution.patch_ids_complete:
                return None
            record = await self._log.find_patch(execution.id, *key)
            if record is not None:
                return _duplicate(record, submission)
            if key not in execution.pending_patches and key not in execution.patch_ids:
                return None

    @staticmethod
    def _rolled_back(executions: list[Execution]) -> None:
        """A group commit failed: what it held is not durable, so each of its executions forgets it."""
        for execution in executions:
            execution.rollback()

    def _committed(self, item: Pending[Execution]) -> None:
        execution = item.execution
        if item.revision is not None:
            execution.mark_committed(item.revision.revision)
            if item.revision.client_patch_id:
                execution.pending_patches.pop((item.revision.agent_id, item.revision.client_patch_id), None)
            self._revisions.publish(execution.id, item.revision)
        if item.snapshot is not None and self._config.retain_revisions is not None:
            up_to = item.snapshot.revision - self._config.retain_revisions
            if up_to > execution.compacted:
                task = asyncio.create_task(self.compact(execution.id, up_to))
                self._compactions.add(task)
                task.add_done_callback(self._compaction_done)
        if item.observation is not None:
            self._observations.committed(execution, item.observation)

    async def compact(self, execution_id: str, up_to: int) -> int:
        """Drop history up to the newest snapshot at or before up_to; returns the new compact revision.

        Reads and watches from before it get the snapshot instead (Watch says so with compact_revision).
        """
        execution = await self._executions.get(execution_id)
        if not 0 <= up_to <= execution.committed:
            raise OutOfRangeError(f"up_to: {up_to} is outside 0..{execution.committed} (the head)")
        snapshot = await self._log.latest_snapshot(execution.id, at_most=up_to)
        if snapshot is None or snapshot.revision <= execution.compacted:
            return execution.compacted
        await self._log.compact(execution.id, snapshot.revision)
        execution.compacted = max(execution.compacted, snapshot.revision)  # another compaction may have gone further
        execution.patch_ids_complete = False
        return execution.compacted

    def _compaction_done(self, task: asyncio.Task[int]) -> None:
        self._compactions.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("compaction failed: %s", task.exception())

    # -- observations ------------------------------------------------------------------------------------

    async def publish_observation(self, execution_id: str, to: str, source: str, kind: str, payload_json: str) -> int:
        execution = await self._executions.get(execution_id)
        for attempt in itertools.count(1):
            try:
                return await self._observations.publish(execution, to, source, kind, payload_json)
            except (DuplicateRowError, RolledBackError):  # another server took the sequence number
                if not self._log.shared or attempt == MAX_COMMIT_RACES:
                    raise
                await self._replicas.refresh(execution, observations=True)
        raise AssertionError("unreachable")

    async def observations(
        self, execution_id: str, agent_id: str, skills: Sequence[str], after_sequence: int
    ) -> AsyncIterator[ObservationRecord]:
        """Observations addressed to agent_id, to one of its skills or to everyone, after after_sequence."""
        execution = await self._executions.get(execution_id)
        await self._replicas.refresh(execution, observations=True)
        async for observation in self._observations.stream(execution, agent_id, skills, after_sequence):
            yield observation

    # -- watch and history -------------------------------------------------------------------------------

    async def watch(self, execution_id: str, from_revision: int) -> AsyncIterator[RevisionRecord | WatchSnapshot]:
        """Every revision after from_revision, in order, exactly once, then live ones as they commit."""
        execution = await self._executions.get(execution_id)
        if from_revision < 0:
            raise InvalidArgumentError(f"from_revision: must be >= 0, got {from_revision}")
        await self._replicas.refresh(execution)
        subscription = self._revisions.subscribe(execution.id)  # before reading history: no gap, no await
        caught_up_to = execution.committed
        cursor = from_revision
        try:
            if cursor < execution.compacted:
                view = await self._timeline.view(execution, execution.compacted)
                yield WatchSnapshot(view.revision, view.state_json, view.state_hash, execution.compacted)
                cursor = execution.compacted
            while cursor < caught_up_to:
                for record in await self._timeline.records(execution, cursor, caught_up_to, 512):
                    yield record
                    cursor = record.revision
            async for record in follow(subscription, cursor, lambda r: r.revision, "watch", "from_revision"):
                yield record
        finally:
            self._revisions.unsubscribe(subscription)

    async def history(
        self, execution_id: str, from_revision: int, to_revision: int, page_size: int, after: int | None = None
    ) -> HistoryPage:
        """A page of committed revisions from from_revision (or after `after`, continuing a page) through
        to_revision (0: the head)."""
        execution = await self._executions.get(execution_id)
        await self._replicas.refresh(execution)
        head = execution.committed
        if page_size < 0:
            raise InvalidArgumentError(f"page_size: must be >= 0, got {page_size}")
        if from_revision < 0 or to_revision < 0:
            raise InvalidArgumentError(f"from_revision, to_revision: must be >= 0, got {from_revision}, {to_revision}")
        if to_revision and from_revision > to_revision:
            raise InvalidArgumentError(f"to_revision: {to_revision} is before from_revision {from_revision}")
        size = min(page_size or 100, self._limits.max_history_page)
        last = min(to_revision or head, head)
        if after is not None and after < 0:
            raise InvalidArgumentError(f"after: must be >= 0, got {after}")
        after = max(max(from_revision, 1) - 1 if after is None else after, execution.compacted)
        records = await self._timeline.records(execution, after, last, size) if after < last else []
        records = _within(records, self._limits.max_message_bytes - PAGE_MARGIN)
        more = bool(records) and records[-1].revision < last
        return HistoryPage(records, more, head, execution.compacted)


def _new_execution(
    execution_id: str, schema_json: str, initial_state_json: str, limits: Limits, window: int
) -> tuple[Execution, dict[str, Any], SnapshotRecord]:
    """A new execution checked whole (schema, policies, initial state) and its revision 0."""
    schema = canonical.parse_object(schema_json or "{}", "schema_json", limits, max_bytes=limits.max_schema_bytes)
    state = strip_nulls(canonical.parse_object(initial_state_json or "{}", "initial_state_json", limits))
    execution = Execution(execution_id, schema, time.time(), window)
    execution.compile()
    execution.policies.check_values(state, "initial_state_json")
    execution.validator.validate(state)
    state_hash = genesis_hash(execution_id, schema, state)
    return execution, state, SnapshotRecord(execution_id, 0, canonical.dumps_str(state), state_hash)


def _within(records: list[RevisionRecord], budget: int) -> list[RevisionRecord]:
    """The first records whose replies fit in `budget` bytes (at least one: a revision always fits alone)."""
    for count, record in enumerate(records):
        json_texts = (record.applied_patch_json, record.action_json, record.resolutions_json)
        budget -= sum(len(text.encode()) for text in json_texts) + 256
        if budget < 0:
            return records[: max(count, 1)]
    return records


def _effective(head: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    change = effective(head, patch)
    return {} if isinstance(change, NoChange) else change


def _duplicate(record: RevisionRecord, submission: Submission) -> SubmitResult:
    if (record.base_revision, record.patch_json, record.action_json) != (
        submission.base_revision,
        submission.patch_json,
        submission.action_json,
    ):
        raise AlreadyExistsError(
            f"client_patch_id: {submission.client_patch_id!r} was already used by agent {submission.agent_id!r} "
            f"for a different patch (revision {record.revision})"
        )
    resolutions = decode_resolutions(record.resolutions_json)
    return SubmitResult(record.revision, record.state_hash, record.applied_patch_json, resolutions, duplicate=True)
