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
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from ..errors import (
    DuplicateRowError,
    FencedError,
    InvalidArgumentError,
    NotFoundError,
    NotOwnerError,
    OutOfRangeError,
    RolledBackError,
)
from ..limits import Limits
from ..metrics import NO_METRICS, Metrics
from ..storage.records import ObservationRecord, RevisionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .committer import GroupCommitter, Pending
from .config import EngineConfig
from .deletion import Deletions
from .execution import Execution, genesis_hash
from .executions import Executions
from .hub import Hub
from .leaseholder import Leaseholder
from .mergepatch import strip_nulls
from .observations import GroupOptions, Observations
from .patches import MAX_COMMIT_RACES, Committing, Patches
from .replicas import Replicas
from .requests import check_execution_id, check_label, new_execution_id
from .results import Created, ExecutionPage, HistoryPage, StateView, SubmitResult, WatchProgress, WatchSnapshot
from .revision_reads import RevisionReads
from .textmerge import TextMerges
from .timeline import Timeline

log = logging.getLogger(__name__)

MAX_EXECUTIONS_PAGE = 1000
"""Executions in one ListExecutions page at most."""


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
        self._executions = Executions(log, config.window, config.max_loaded_executions, config.limits.max_base_lag)
        self._revisions: Hub[RevisionRecord] = Hub(config.subscriber_queue, config.max_watchers, "watchers")
        self._committer: GroupCommitter[Execution] = GroupCommitter(
            log, self._committed, self._rolled_back, config.max_batch, metrics
        )
        self._timeline = Timeline(log)
        self._texts = TextMerges(config.limits, worker)
        self._observations = Observations(
            log,
            self._executions,
            self._committer,
            config.limits,
            config.subscriber_queue,
            config.max_watchers,
            config.ack_deadline,
            config.group_idle,
        )
        self._compactions: set[asyncio.Task[int]] = set()
        self._deletions = Deletions(log, self._executions, self._committer, self._revisions, self._observations)
        self._replicas = Replicas(
            log, self._executions, self._revisions, self._observations, on_deleted=self._deletions.forget
        )
        self._executions_lost = 0
        """Executions dropped since the start because another replica took them over (a metric)."""
        leases = log.leases()
        self._leaseholder = None
        if leases is not None and config.lease_seconds is not None:
            self._leaseholder = Leaseholder(leases, config.lease_seconds, self._executions.lease_epochs, self._lost)
            self._executions.leaseholder = self._leaseholder
            self._committer.on_fenced = self._lost
        self._patches = Patches(log, self._committer, self._timeline, self._texts, self._replicas, config, metrics)
        self._reads = RevisionReads(self._executions, self._revisions, self._replicas, self._timeline, config)
        metrics.watch_gauges(
            watchers=self._revisions.count,
            observation_streams=self._observations.stream_count,
            commit_queue_depth=lambda: self._committer.queue_depth,
            executions_loaded=lambda: len(self._executions.loaded),
            executions_unloaded=lambda: self._executions.unloads,
            executions_lost=lambda: self._executions_lost,
        )

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def start(self, address: str = "") -> None:
        """Open the log; each execution is loaded from it on first use. On a shared log with leases, `address`
        is where other replicas forward calls for the executions this one owns (see `advertise`)."""
        await self._log.open()
        self._committer.start()
        if self._leaseholder is not None:
            await self._leaseholder.start(address)
        self._replicas.start(leased=self._leaseholder is not None)

    async def advertise(self, address: str) -> None:
        """Tell other replicas of a shared log to forward calls for this one's executions to `address`."""
        if self._leaseholder is not None:
            await self._leaseholder.advertise(address)

    async def owns(self, execution_id: str) -> bool:
        """Whether this replica holds the execution's lease, taken now if its owner's heartbeat expired (or it
        has none); True on a log of this server's own."""
        if self._leaseholder is None:
            return True
        try:
            return await self._leaseholder.take(execution_id) is not None
        except NotOwnerError:
            return False

    @property
    def replica_id(self) -> str | None:
        """This replica's id among those of a shared log with leases (None otherwise)."""
        return self._leaseholder.owner if self._leaseholder is not None else None

    async def close(self) -> None:
        """Commit what is pending, finish compactions, hand this replica's leases over, then close the log."""
        await self._replicas.close()
        self._observations.close()
        await self._committer.close()
        await asyncio.gather(*self._compactions, return_exceptions=True)
        if self._leaseholder is not None:
            await self._leaseholder.close()
        self._texts.close()
        await self._log.close()

    def _lost(self, epochs: Mapping[str, int]) -> None:
        """Another replica took these executions over (id -> the epoch this replica held): drop them (unless
        taken back since), and end their streams here UNAVAILABLE (a client resumes them, and this server
        forwards them to the new owner)."""
        for execution_id, epoch in epochs.items():
            execution = self._executions.loaded.get(execution_id)
            if execution is None or execution.lease_epoch != epoch:
                continue
            self._executions_lost += 1
            self._executions.forget(execution_id)
            moved = NotOwnerError(execution_id, "", 0.0)
            self._revisions.cut(execution_id, moved)
            self._observations.end(execution_id, moved)

    def on_storage_health(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(False)` when a commit fails and `callback(True)` when one succeeds again after that."""
        self._committer.on_storage_health = callback

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
        if self._log.shared and self._executions.holds(execution_id):
            await self._deletions.forget_if_deleted(execution_id)  # another server may have deleted it
        execution.begin(0, state, genesis.state_hash)
        await self._executions.create(execution, genesis)
        return Created(execution_id, 0, genesis.state_hash)

    async def list_executions(self, prefix: str, page_size: int, after: str | None = None) -> ExecutionPage:
        """A page of the executions whose id starts with `prefix`, by id, after `after` (continuing a page),
        as the log has them (durable heads)."""
        if prefix:
            check_label(prefix, "prefix", self._limits)
        if page_size < 0:
            raise InvalidArgumentError(f"page_size: must be >= 0, got {page_size}")
        size = min(page_size or 100, MAX_EXECUTIONS_PAGE)
        found = await self._log.list_summaries(prefix, after or "", size + 1)
        return ExecutionPage(found[:size], more=len(found) > size)

    async def delete_execution(self, execution_id: str) -> int:
        """Remove an execution whole, and end its open watches and streams NOT_FOUND; returns the head
        revision removed. What was merged or published into it before the call is committed (or fails)
        first, so that no commit of it can follow the delete; from the call on, nothing more is merged into
        it (deletion.py)."""
        try:
            return await self._deletions.delete(execution_id)
        except FencedError as e:
            self._lost(e.epochs)
            raise

    async def head_revision(self, execution_id: str) -> int:
        async with self._executions.use(execution_id) as execution:
            return execution.committed

    async def get_state(self, execution_id: str, at_revision: int | None = None) -> StateView:
        async with self._executions.use(execution_id) as execution:
            if at_revision is None or at_revision > execution.committed:
                # linearizable: nothing another server acknowledged is missed
                await self._replicas.refresh(execution)
            revision = execution.committed if at_revision is None else at_revision
            if not 0 <= revision <= execution.committed:
                raise OutOfRangeError(
                    f"at_revision: {revision} is outside 0..{execution.committed} (the head)",
                    revision=revision,
                    head_revision=execution.committed,
                )
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
        writes must be owned by agent_id or one of writer_skills where the schema declares owners."""
        async with self._executions.use(execution_id) as execution:
            return await self._patches.submit(execution, agent_id, base_revision, patch_json, client_patch_id,
                                              action_json, writer_skills)  # fmt: skip

    def submit_patch_now(
        self,
        execution_id: str,
        agent_id: str,
        base_revision: int,
        patch_json: str,
        client_patch_id: str = "",
        action_json: str = "",
        writer_skills: frozenset[str] = frozenset(),
    ) -> Committing | None:
        """`submit_patch` without waiting where it need not wait (Patches.submit_now); None: call it."""
        execution = self._executions.loaded.get(execution_id)
        if execution is None or (self._leaseholder is not None and not self._leaseholder.alive):
            return None
        self._executions.touch(execution)
        return self._patches.submit_now(execution, agent_id, base_revision, patch_json, client_patch_id,
                                        action_json, writer_skills)  # fmt: skip

    def _rolled_back(self, executions: list[Execution]) -> None:
        """A group commit failed: what it held is not durable, so each of its executions forgets it."""
        for execution in executions:
            execution.rollback()
            self._executions.settled(execution)

    def _committed(self, item: Pending[Execution]) -> None:
        execution = item.execution
        if item.revision is not None:
            execution.mark_committed(item.revision.revision)
            if item.revision.client_patch_id:
                execution.pending_patches.pop((item.revision.agent_id, item.revision.client_patch_id), None)
            self._revisions.publish(execution.id, item.revision)
        if item.snapshot is not None and self._config.retain_revisions is not None and not execution.deleted:
            up_to = item.snapshot.revision - self._config.retain_revisions
            if up_to > execution.compacted:
                task = asyncio.create_task(self.compact(execution.id, up_to))
                self._compactions.add(task)
                task.add_done_callback(self._compaction_done)
        if item.observation is not None:
            self._observations.committed(execution, item.observation)
        self._executions.settled(execution)

    async def compact(self, execution_id: str, up_to: int) -> int:
        """Drop history up to the newest snapshot at or before up_to; returns the new compact revision.

        Reads and watches from before it get the snapshot instead (Watch says so with compact_revision).
        """
        async with self._executions.use(execution_id) as execution:
            if not 0 <= up_to <= execution.committed:
                raise OutOfRangeError(
                    f"up_to: {up_to} is outside 0..{execution.committed} (the head)",
                    revision=up_to,
                    head_revision=execution.committed,
                )
            snapshot = await self._log.latest_snapshot(execution.id, at_most=up_to)
            if snapshot is None or snapshot.revision <= execution.compacted:
                return execution.compacted
            try:
                await self._log.compact(execution.id, snapshot.revision, execution.lease_epoch)
            except FencedError as e:
                self._lost(e.epochs)
                raise
            # another compaction may have gone further
            execution.compacted = max(execution.compacted, snapshot.revision)
            execution.keys.forget(execution.compacted)
            while execution.paths.fold(execution.oldest_base):  # what only older bases needed, a little at a time
                await asyncio.sleep(0)
            return execution.compacted

    def _compaction_done(self, task: asyncio.Task[int]) -> None:
        self._compactions.discard(task)
        if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), NotFoundError):
            log.error("compaction failed: %s", task.exception())  # (NotFoundError: the execution was deleted)

    # -- observations ------------------------------------------------------------------------------------

    async def publish_observation(self, execution_id: str, to: str, source: str, kind: str, payload_json: str) -> int:
        async with self._executions.use(execution_id) as execution:
            for attempt in itertools.count(1):
                try:
                    return await self._observations.publish(execution, to, source, kind, payload_json)
                except (DuplicateRowError, RolledBackError):  # another server took the sequence number
                    if not self._replicas.racing(execution) or attempt == MAX_COMMIT_RACES:
                        raise
                    await self._replicas.refresh(execution, observations=True)
            raise AssertionError("unreachable")

    async def observations(
        self, execution_id: str, agent_id: str, skills: Sequence[str], after_sequence: int
    ) -> AsyncGenerator[ObservationRecord, None]:
        """Observations addressed to agent_id, to one of its skills or to everyone, after after_sequence."""
        async with self._executions.use(execution_id) as execution:
            await self._replicas.refresh(execution, observations=True)
            async for observation in self._observations.stream(execution, agent_id, skills, after_sequence):
                yield observation

    async def group_observations(
        self, execution_id: str, agent_id: str, skills: Sequence[str], after_sequence: int, group: GroupOptions
    ) -> AsyncGenerator[tuple[ObservationRecord, int], None]:
        """As a member of a consumer group (groups.py): (observation, delivery count) for what the group
        hands this member, and (observation, 0) for what is addressed to agent_id, after after_sequence."""
        async with self._executions.use(execution_id) as execution:
            await self._replicas.refresh(execution, observations=True)
            async with contextlib.aclosing(
                self._observations.group_stream(execution, agent_id, skills, after_sequence, group)
            ) as stream:
                async for item in stream:
                    yield item

    async def ack_observations(
        self, execution_id: str, group: str, agent_id: str, sequences: Sequence[int], requeue: bool = False
    ) -> int:
        """Tell a consumer group that its member `agent_id` handled the observations `sequences` (or, with
        requeue, did not: to be delivered again at once); returns how many that member held unacknowledged."""
        async with self._executions.use(execution_id) as execution:
            return self._observations.ack(execution, group, agent_id, sequences, requeue)

    # -- watch and history -------------------------------------------------------------------------------

    def watch(
        self, execution_id: str, from_revision: int
    ) -> AsyncGenerator[RevisionRecord | WatchSnapshot | WatchProgress, None]:
        """Every revision after from_revision, in order, exactly once, then live ones as they commit; and,
        once caught up, a WatchProgress after each `progress_interval` seconds in which nothing else came."""
        return self._reads.watch(execution_id, from_revision)

    async def history(
        self, execution_id: str, from_revision: int, to_revision: int, page_size: int, after: int | None = None
    ) -> HistoryPage:
        """A page of committed revisions from from_revision (or after `after`, continuing a page) through
        to_revision (0: the head)."""
        return await self._reads.history(execution_id, from_revision, to_revision, page_size, after)


def _new_execution(
    execution_id: str, schema_json: str, initial_state_json: str, limits: Limits, window: int
) -> tuple[Execution, dict[str, Any], SnapshotRecord]:
    """A new execution checked whole (schema, policies, initial state) and its revision 0."""
    schema = canonical.parse_object(schema_json or "{}", "schema_json", limits, max_bytes=limits.max_schema_bytes)
    state = strip_nulls(canonical.parse_object(initial_state_json or "{}", "initial_state_json", limits))
    execution = Execution(execution_id, schema, time.time(), window, limits.max_base_lag)
    execution.compile()
    execution.policies.check_values(state, "initial_state_json")
    execution.validator.validate(state)
    state_hash = genesis_hash(execution_id, schema, state)
    return execution, state, SnapshotRecord(execution_id, 0, canonical.dumps_str(state), state_hash)
