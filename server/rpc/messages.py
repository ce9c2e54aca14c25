"""The engine's values as wire messages, shared by the RPCs that send them."""

from __future__ import annotations

import functools

from google.protobuf.timestamp_pb2 import Timestamp

from skillstate.state.v1 import state_pb2 as pb

from ..engine.merge import Resolution, decode_resolutions
from ..engine.policy import MergePolicy
from ..engine.results import SubmitResult, WatchSnapshot
from ..storage.records import ExecutionSummary, ObservationRecord, RevisionRecord

_POLICY = {policy: pb.MergePolicy.Value(f"MERGE_POLICY_{policy.name}") for policy in MergePolicy}


def resolution(resolved: Resolution) -> pb.Resolution:
    return pb.Resolution(
        path=resolved.path,
        policy=_POLICY[resolved.policy],
        outcome=pb.ResolutionOutcome.Value(f"RESOLUTION_OUTCOME_{resolved.outcome}"),
    )


def submit_response(result: SubmitResult, into: pb.SubmitPatchResponse | None = None) -> pb.SubmitPatchResponse:
    """The reply to a submit; filled in `into` (a field of a larger message) when given, which spares a copy."""
    reply = pb.SubmitPatchResponse() if into is None else into
    reply.revision = result.revision
    reply.state_hash = result.state_hash
    reply.applied_patch_json = result.applied_patch_json
    if result.resolutions:
        reply.resolutions.extend(resolution(r) for r in result.resolutions)
    reply.duplicate = result.duplicate
    return reply


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


@functools.lru_cache(maxsize=4096)
def revision_event(record: RevisionRecord) -> pb.RevisionEvent:
    """One message per revision, shared by every stream that sends it: callers never mutate it."""
    return pb.RevisionEvent(
        revision=record.revision,
        agent_id=record.agent_id,
        base_revision=record.base_revision,
        applied_patch_json=record.applied_patch_json,
        action_json=record.action_json,
        state_hash=record.state_hash,
        commit_time=_timestamp(record.committed_at),
        client_patch_id=record.client_patch_id,
        resolutions=[resolution(r) for r in decode_resolutions(record.resolutions_json)],
    )


def snapshot(item: WatchSnapshot) -> pb.Snapshot:
    return pb.Snapshot(revision=item.revision, state_json=item.state_json, state_hash=item.state_hash)


def observation(record: ObservationRecord, delivery: int = 0) -> pb.Observation:
    return pb.Observation(
        sequence=record.sequence,
        to=record.to,
        source=record.source,
        kind=record.kind,
        payload_json=record.payload_json,
        publish_time=_timestamp(record.published_at),
        delivery=delivery,
    )


def execution_summary(summary: ExecutionSummary) -> pb.ExecutionSummary:
    message = pb.ExecutionSummary(
        execution_id=summary.execution_id,
        head_revision=summary.head_revision,
        create_time=_timestamp(summary.created_at),
        agents=summary.agents,
        agent_count=summary.agent_count,
        compact_revision=summary.compact_revision,
    )
    if summary.updated_at is not None:
        message.update_time.CopyFrom(_timestamp(summary.updated_at))
    return message
