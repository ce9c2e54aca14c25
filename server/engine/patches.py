"""One patch from submission to commit: checked, merged into the head (reading the log back first when the
execution was loaded after its base), validated, made the next revision and queued for the group commit.

Between the merge and the enqueue there is no await, so a merge always sees exactly the head it commits on;
a caller is answered only after its revision is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AlreadyExistsError,
    BaseAheadError,
    ConflictError,
    DuplicateRowError,
    LimitExceededError,
    OutOfRangeError,
    RolledBackError,
    StorageError,
)
from ..metrics import Metrics
from ..storage.records import RevisionRecord, SnapshotRecord
from ..storage.revision_log.base import RevisionLog
from . import canonical
from .committer import GroupCommitter, Pending
from .config import EngineConfig
from .execution import Execution, revision_hash
from .merge import Resolution, decode_resolutions, encode_resolutions, merge
from .mergepatch import NoChange, effective, path_of
from .patch_keys import FILING_PAGE
from .replicas import Replicas
from .requests import Submission
from .results import SubmitResult
from .textmerge import Deferred, TextMerges
from .timeline import Timeline, compacted_base
from .undo import Undo

MAX_COMMIT_RACES = 100
"""How often a patch is merged again after another server's commit beat it, before UNAVAILABLE."""


class Patches:
    """Submits patches to executions held in memory (the engine finds the execution)."""

    def __init__(
        self,
        log: RevisionLog,
        committer: GroupCommitter[Execution],
        timeline: Timeline,
        texts: TextMerges,
        replicas: Replicas,
        config: EngineConfig,
        metrics: Metrics,
    ) -> None:
        self._log = log
        self._committer = committer
        self._timeline = timeline
        self._texts = texts
        self._replicas = replicas
        self._config = config
        self._limits = config.limits
        self._metrics = metrics

    async def submit(
        self,
        execution: Execution,
        agent_id: str,
        base_revision: int,
        patch_json: str,
        client_patch_id: str,
        action_json: str,
        writer_skills: frozenset[str],
    ) -> SubmitResult:
        """Merge, validate and durably commit one patch (StateEngine.submit_patch says what a caller may
        rely on). On a shared log, a commit that another server's commit beat (the same revision number) is
        merged again on the state caught up from the log, as often as it takes."""
        submission = Submission.check(agent_id, base_revision, patch_json, client_patch_id, action_json, self._limits)
        execution.owners.check(submission.patch, submission.agent_id, writer_skills)
        execution.policies.check_values(submission.patch, "patch_json")
        for attempt in itertools.count(1):
            try:
                return await self._submit(execution, submission)
            except (DuplicateRowError, RolledBackError):
                if not self._replicas.racing(execution) or attempt == MAX_COMMIT_RACES:
                    raise
                await self._replicas.refresh(execution)
        raise AssertionError("unreachable")

    def submit_now(
        self,
        execution: Execution,
        agent_id: str,
        base_revision: int,
        patch_json: str,
        client_patch_id: str,
        action_json: str,
        writer_skills: frozenset[str],
    ) -> Committing | None:
        """`submit` without waiting, where it need not wait: the patch checked, merged and queued for the
        group commit at once, its result to be answered once the commit succeeds. None where `submit` would
        wait for something first (a base not committed here, an idempotency key that may have been used, a
        base older than the path index reaches, a text merge off the loop, a conflict to answer once its
        winners are durable, a shared log's commit races where no lease makes this server its only writer):
        call `submit`, which decides as it would have. Raises what
        `submit` raises before it waits (a malformed patch, a path not owned, a schema violation)."""
        if self._replicas.racing(execution):
            return None
        submission = Submission.check(agent_id, base_revision, patch_json, client_patch_id, action_json, self._limits)
        execution.owners.check(submission.patch, submission.agent_id, writer_skills)
        execution.policies.check_values(submission.patch, "patch_json")
        lag = execution.committed - base_revision
        if not 0 <= lag <= self._limits.max_base_lag or base_revision < execution.compacted:
            return None  # ahead of this server (refresh from the log), or too far behind (refused there)
        if client_patch_id and not execution.key_unused(submission.key):
            return None
        merged = self._merge_now(execution, submission)
        if merged is None:
            return None
        applied, resolutions = merged
        record, pending = self._append(execution, submission, applied, resolutions)
        if client_patch_id:
            execution.pending_patches[submission.key] = pending
        result = SubmitResult(record.revision, record.state_hash, record.applied_patch_json, tuple(resolutions))
        return Committing(pending, result)

    def _merge_now(
        self, execution: Execution, submission: Submission
    ) -> tuple[dict[str, Any], list[Resolution]] | None:
        """`_merge` of a patch whose key is unused, where it needs no wait (else None)."""
        if submission.base_revision < execution.paths.start:
            return None
        try:
            return self._merge_into_head(execution, submission)
        except (Deferred, ConflictError):
            return None  # `submit` merges again, and waits as these need

    async def _submit(self, execution: Execution, submission: Submission) -> SubmitResult:
        base_revision, client_patch_id = submission.base_revision, submission.client_patch_id
        if base_revision > execution.committed:
            await self._replicas.refresh(execution)  # the agent may have read it from another server
        if base_revision > execution.committed:
            raise BaseAheadError(
                f"base_revision: {base_revision} is ahead of the head revision {execution.committed}",
                base_revision=base_revision,
                head_revision=execution.committed,
            )
        self._check_lag(execution, base_revision)
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
            if base_revision < execution.compacted:
                raise compacted_base(execution, base_revision)
            self._check_lag(execution, base_revision)  # again: commits may have folded past it during an await
            if base_revision >= execution.paths.start:
                break
            await self._timeline.extend(execution, base_revision)  # then look again: an await passed
        # From here to enqueue there is no await: the merge sees exactly the head it commits on.
        try:
            return self._merge_into_head(execution, submission)
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

    def _check_lag(self, execution: Execution, base_revision: int) -> None:
        lag, limit = execution.committed - base_revision, self._limits.max_base_lag
        if lag > limit:
            raise OutOfRangeError(
                f"base_revision: {base_revision} is {lag} revisions behind the head {execution.committed}, "
                f"more than the limit of {limit}: re-read the state and retry",
                revision=base_revision,
                head_revision=execution.committed,
            )

    def _merge_into_head(self, execution: Execution, submission: Submission) -> tuple[dict[str, Any], list[Resolution]]:
        """The patch merged into head under each path's policy, its resolutions counted; raises Deferred (a
        text merge to compute off the loop first) or ConflictError, having changed nothing."""
        if execution.untouched_since(submission.base_revision, submission.patch):
            return _effective(execution.state, submission.patch), []  # nothing to merge with
        result = merge(
            head=execution.state,
            head_revision=execution.committed,
            paths=execution.paths.root,
            patch=submission.patch,
            stamp=(submission.base_revision, submission.agent_id),
            policies=execution.policies,
            client_patch_id=submission.client_patch_id,
            texts=self._texts,
        )
        for resolution in result.resolutions:
            self._metrics.resolved(resolution.policy.value, resolution.outcome.lower())
        return result.applied_patch, result.resolutions

    def _append(
        self, execution: Execution, submission: Submission, applied: dict[str, Any], resolutions: list[Resolution]
    ) -> tuple[RevisionRecord, Pending[Execution]]:
        """Make a merged patch the next revision and queue it for commit: all or nothing."""
        self._committer.check_open()
        execution.refuse_if_deleted()
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
                    f"{self._limits.max_state_bytes:,}",
                    limit="max_state_bytes",
                    limit_value=self._limits.max_state_bytes,
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
            revision = execution.keys.revision_of(key)
            if revision is not None:
                return _duplicate(await self._timeline.record(execution, revision), submission)
            if execution.keys.unused(key):
                return None
            if execution.keys.unfiled_below:  # file some more of the log's keys: lookups soon stop
                below = execution.keys.unfiled_below
                page = await self._log.patch_ids(execution.id, below - 1, FILING_PAGE)
                execution.keys.file(below, page, last=len(page) < FILING_PAGE)
            record = await self._log.find_patch(execution.id, *key)
            if record is not None:
                return _duplicate(record, submission)
            if key not in execution.pending_patches and execution.keys.revision_of(key) is None:
                return None


@dataclass(slots=True)
class Committing:
    """A patch merged and queued for the group commit (Patches.submit_now): `result` is its answer once it
    is durable; if its commit fails, the error is the answer. Not frozen: one is made per patch."""

    pending: Pending[Execution]
    result: SubmitResult

    @property
    def durable(self) -> asyncio.Future[None]:
        """Completes once the revision is durable, or fails with the commit's error."""
        return self.pending.future

    def when_durable(self, listener: Callable[[Exception | None], None]) -> None:
        """Call `listener(None)` once the revision is durable, or `listener(error)` if its commit fails,
        synchronously from the group commit (one listener)."""
        self.pending.listener = listener


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
