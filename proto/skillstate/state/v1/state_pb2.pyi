import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MergePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MERGE_POLICY_UNSPECIFIED: _ClassVar[MergePolicy]
    MERGE_POLICY_REJECT: _ClassVar[MergePolicy]
    MERGE_POLICY_LWW: _ClassVar[MergePolicy]
    MERGE_POLICY_COUNTER: _ClassVar[MergePolicy]
    MERGE_POLICY_MAX: _ClassVar[MergePolicy]
    MERGE_POLICY_MIN: _ClassVar[MergePolicy]
    MERGE_POLICY_SET: _ClassVar[MergePolicy]
    MERGE_POLICY_APPEND: _ClassVar[MergePolicy]
    MERGE_POLICY_TEXT: _ClassVar[MergePolicy]

class ResolutionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLUTION_OUTCOME_UNSPECIFIED: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_PATCH_WON: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_HEAD_KEPT: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_COMBINED: _ClassVar[ResolutionOutcome]
    RESOLUTION_OUTCOME_UNCHANGED: _ClassVar[ResolutionOutcome]
MERGE_POLICY_UNSPECIFIED: MergePolicy
MERGE_POLICY_REJECT: MergePolicy
MERGE_POLICY_LWW: MergePolicy
MERGE_POLICY_COUNTER: MergePolicy
MERGE_POLICY_MAX: MergePolicy
MERGE_POLICY_MIN: MergePolicy
MERGE_POLICY_SET: MergePolicy
MERGE_POLICY_APPEND: MergePolicy
MERGE_POLICY_TEXT: MergePolicy
RESOLUTION_OUTCOME_UNSPECIFIED: ResolutionOutcome
RESOLUTION_OUTCOME_PATCH_WON: ResolutionOutcome
RESOLUTION_OUTCOME_HEAD_KEPT: ResolutionOutcome
RESOLUTION_OUTCOME_COMBINED: ResolutionOutcome
RESOLUTION_OUTCOME_UNCHANGED: ResolutionOutcome

class Resolution(_message.Message):
    __slots__ = ("path", "policy", "outcome")
    PATH_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    path: str
    policy: MergePolicy
    outcome: ResolutionOutcome
    def __init__(self, path: _Optional[str] = ..., policy: _Optional[_Union[MergePolicy, str]] = ..., outcome: _Optional[_Union[ResolutionOutcome, str]] = ...) -> None: ...

class CreateExecutionRequest(_message.Message):
    __slots__ = ("execution_id", "schema_json", "initial_state_json")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    schema_json: str
    initial_state_json: str
    def __init__(self, execution_id: _Optional[str] = ..., schema_json: _Optional[str] = ..., initial_state_json: _Optional[str] = ...) -> None: ...

class CreateExecutionResponse(_message.Message):
    __slots__ = ("execution_id", "revision", "state_hash")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    revision: int
    state_hash: str
    def __init__(self, execution_id: _Optional[str] = ..., revision: _Optional[int] = ..., state_hash: _Optional[str] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ("execution_id", "at_revision")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_REVISION_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    at_revision: int
    def __init__(self, execution_id: _Optional[str] = ..., at_revision: _Optional[int] = ...) -> None: ...

class GetStateResponse(_message.Message):
    __slots__ = ("revision", "state_json", "state_hash")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    revision: int
    state_json: str
    state_hash: str
    def __init__(self, revision: _Optional[int] = ..., state_json: _Optional[str] = ..., state_hash: _Optional[str] = ...) -> None: ...

class SubmitPatchRequest(_message.Message):
    __slots__ = ("execution_id", "agent_id", "base_revision", "patch_json", "client_patch_id", "action_json")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_REVISION_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    CLIENT_PATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_JSON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    agent_id: str
    base_revision: int
    patch_json: str
    client_patch_id: str
    action_json: str
    def __init__(self, execution_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., base_revision: _Optional[int] = ..., patch_json: _Optional[str] = ..., client_patch_id: _Optional[str] = ..., action_json: _Optional[str] = ...) -> None: ...

class SubmitPatchResponse(_message.Message):
    __slots__ = ("revision", "state_hash", "applied_patch_json", "resolutions", "duplicate")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    revision: int
    state_hash: str
    applied_patch_json: str
    resolutions: _containers.RepeatedCompositeFieldContainer[Resolution]
    duplicate: bool
    def __init__(self, revision: _Optional[int] = ..., state_hash: _Optional[str] = ..., applied_patch_json: _Optional[str] = ..., resolutions: _Optional[_Iterable[_Union[Resolution, _Mapping]]] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class RevisionEvent(_message.Message):
    __slots__ = ("revision", "agent_id", "base_revision", "applied_patch_json", "action_json", "state_hash", "commit_time", "client_patch_id", "resolutions")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_REVISION_FIELD_NUMBER: _ClassVar[int]
    APPLIED_PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTION_JSON_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_PATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    revision: int
    agent_id: str
    base_revision: int
    applied_patch_json: str
    action_json: str
    state_hash: str
    commit_time: _timestamp_pb2.Timestamp
    client_patch_id: str
    resolutions: _containers.RepeatedCompositeFieldContainer[Resolution]
    def __init__(self, revision: _Optional[int] = ..., agent_id: _Optional[str] = ..., base_revision: _Optional[int] = ..., applied_patch_json: _Optional[str] = ..., action_json: _Optional[str] = ..., state_hash: _Optional[str] = ..., commit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., client_patch_id: _Optional[str] = ..., resolutions: _Optional[_Iterable[_Union[Resolution, _Mapping]]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("revision", "state_json", "state_hash")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    STATE_HASH_FIELD_NUMBER: _ClassVar[int]
    revision: int
    state_json: str
    state_hash: str
    def __init__(self, revision: _Optional[int] = ..., state_json: _Optional[str] = ..., state_hash: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("execution_id", "from_revision")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    from_revision: int
    def __init__(self, execution_id: _Optional[str] = ..., from_revision: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("event", "snapshot", "progress", "compact_revision")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    COMPACT_REVISION_FIELD_NUMBER: _ClassVar[int]
    event: RevisionEvent
    snapshot: Snapshot
    progress: Progress
    compact_revision: int
    def __init__(self, event: _Optional[_Union[RevisionEvent, _Mapping]] = ..., snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., compact_revision: _Optional[int] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("execution_id", "from_revision", "to_revision", "page_size", "page_token")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    TO_REVISION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    from_revision: int
    to_revision: int
    page_size: int
    page_token: str
    def __init__(self, execution_id: _Optional[str] = ..., from_revision: _Optional[int] = ..., to_revision: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("revisions", "next_page_token", "head_revision", "compact_revision")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HEAD_REVISION_FIELD_NUMBER: _ClassVar[int]
    COMPACT_REVISION_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[RevisionEvent]
    next_page_token: str
    head_revision: int
    compact_revision: int
    def __init__(self, revisions: _Optional[_Iterable[_Union[RevisionEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., head_revision: _Optional[int] = ..., compact_revision: _Optional[int] = ...) -> None: ...

class PublishObservationRequest(_message.Message):
    __slots__ = ("execution_id", "to", "source", "kind", "payload_json")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    to: str
    source: str
    kind: str
    payload_json: str
    def __init__(self, execution_id: _Optional[str] = ..., to: _Optional[str] = ..., source: _Optional[str] = ..., kind: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class PublishObservationResponse(_message.Message):
    __slots__ = ("sequence",)
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    def __init__(self, sequence: _Optional[int] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("sequence", "to", "source", "kind", "payload_json", "publish_time", "delivery")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    to: str
    source: str
    kind: str
    payload_json: str
    publish_time: _timestamp_pb2.Timestamp
    delivery: int
    def __init__(self, sequence: _Optional[int] = ..., to: _Optional[str] = ..., source: _Optional[str] = ..., kind: _Optional[str] = ..., payload_json: _Optional[str] = ..., publish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delivery: _Optional[int] = ...) -> None: ...

class StreamObservationsRequest(_message.Message):
    __slots__ = ("execution_id", "agent_id", "skills", "after_sequence", "group", "ack_deadline_ms", "max_unacked")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ACK_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_UNACKED_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    agent_id: str
    skills: _containers.RepeatedScalarFieldContainer[str]
    after_sequence: int
    group: str
    ack_deadline_ms: int
    max_unacked: int
    def __init__(self, execution_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., skills: _Optional[_Iterable[str]] = ..., after_sequence: _Optional[int] = ..., group: _Optional[str] = ..., ack_deadline_ms: _Optional[int] = ..., max_unacked: _Optional[int] = ...) -> None: ...

class StreamObservationsResponse(_message.Message):
    __slots__ = ("observation",)
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    observation: Observation
    def __init__(self, observation: _Optional[_Union[Observation, _Mapping]] = ...) -> None: ...

class AckObservationsRequest(_message.Message):
    __slots__ = ("execution_id", "group", "sequences", "requeue", "agent_id")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    group: str
    sequences: _containers.RepeatedScalarFieldContainer[int]
    requeue: bool
    agent_id: str
    def __init__(self, execution_id: _Optional[str] = ..., group: _Optional[str] = ..., sequences: _Optional[_Iterable[int]] = ..., requeue: _Optional[bool] = ..., agent_id: _Optional[str] = ...) -> None: ...

class AckObservationsResponse(_message.Message):
    __slots__ = ("acknowledged",)
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    acknowledged: int
    def __init__(self, acknowledged: _Optional[int] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ("execution_id", "up_to_revision")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    UP_TO_REVISION_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    up_to_revision: int
    def __init__(self, execution_id: _Optional[str] = ..., up_to_revision: _Optional[int] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("compact_revision",)
    COMPACT_REVISION_FIELD_NUMBER: _ClassVar[int]
    compact_revision: int
    def __init__(self, compact_revision: _Optional[int] = ...) -> None: ...

class ListExecutionsRequest(_message.Message):
    __slots__ = ("prefix", "page_size", "page_token")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_size: int
    page_token: str
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExecutionSummary(_message.Message):
    __slots__ = ("execution_id", "head_revision", "create_time", "update_time", "agents", "agent_count", "compact_revision")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    HEAD_REVISION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    AGENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    COMPACT_REVISION_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    head_revision: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    agents: _containers.RepeatedScalarFieldContainer[str]
    agent_count: int
    compact_revision: int
    def __init__(self, execution_id: _Optional[str] = ..., head_revision: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agents: _Optional[_Iterable[str]] = ..., agent_count: _Optional[int] = ..., compact_revision: _Optional[int] = ...) -> None: ...

class ListExecutionsResponse(_message.Message):
    __slots__ = ("executions", "next_page_token")
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    executions: _containers.RepeatedCompositeFieldContainer[ExecutionSummary]
    next_page_token: str
    def __init__(self, executions: _Optional[_Iterable[_Union[ExecutionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteExecutionRequest(_message.Message):
    __slots__ = ("execution_id",)
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    def __init__(self, execution_id: _Optional[str] = ...) -> None: ...

class DeleteExecutionResponse(_message.Message):
    __slots__ = ("head_revision",)
    HEAD_REVISION_FIELD_NUMBER: _ClassVar[int]
    head_revision: int
    def __init__(self, head_revision: _Optional[int] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("head_revision",)
    HEAD_REVISION_FIELD_NUMBER: _ClassVar[int]
    head_revision: int
    def __init__(self, head_revision: _Optional[int] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("open", "submit", "ack")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    open: SessionOpen
    submit: SessionSubmit
    ack: SessionAck
    def __init__(self, open: _Optional[_Union[SessionOpen, _Mapping]] = ..., submit: _Optional[_Union[SessionSubmit, _Mapping]] = ..., ack: _Optional[_Union[SessionAck, _Mapping]] = ...) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("execution_id", "agent_id", "skills", "after_sequence", "group", "ack_deadline_ms", "max_unacked", "from_revision", "without_observations")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ACK_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_UNACKED_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    agent_id: str
    skills: _containers.RepeatedScalarFieldContainer[str]
    after_sequence: int
    group: str
    ack_deadline_ms: int
    max_unacked: int
    from_revision: int
    without_observations: bool
    def __init__(self, execution_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., skills: _Optional[_Iterable[str]] = ..., after_sequence: _Optional[int] = ..., group: _Optional[str] = ..., ack_deadline_ms: _Optional[int] = ..., max_unacked: _Optional[int] = ..., from_revision: _Optional[int] = ..., without_observations: _Optional[bool] = ...) -> None: ...

class SessionSubmit(_message.Message):
    __slots__ = ("sequence", "patch")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    patch: SubmitPatchRequest
    def __init__(self, sequence: _Optional[int] = ..., patch: _Optional[_Union[SubmitPatchRequest, _Mapping]] = ...) -> None: ...

class SessionAck(_message.Message):
    __slots__ = ("sequences", "requeue")
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    sequences: _containers.RepeatedScalarFieldContainer[int]
    requeue: bool
    def __init__(self, sequences: _Optional[_Iterable[int]] = ..., requeue: _Optional[bool] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("result", "observation", "revision", "progress", "snapshot")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    result: SessionResult
    observation: Observation
    revision: RevisionEvent
    progress: Progress
    snapshot: Snapshot
    def __init__(self, result: _Optional[_Union[SessionResult, _Mapping]] = ..., observation: _Optional[_Union[Observation, _Mapping]] = ..., revision: _Optional[_Union[RevisionEvent, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class SessionResult(_message.Message):
    __slots__ = ("sequence", "response", "error")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    response: SubmitPatchResponse
    error: _status_pb2.Status
    def __init__(self, sequence: _Optional[int] = ..., response: _Optional[_Union[SubmitPatchResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...
