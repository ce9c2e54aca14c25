"""The Python client of the skillstate state server (async first; `SyncStateClient` blocks).

async with StateClient("127.0.0.1:50051") as client:
    created = await client.create_execution(schema={...}, initial_state={...})
    result = await client.submit_patch(created.execution_id, {"done": True}, agent_id="a", base_revision=0)
"""

from ._client import RetryPolicy, StateClient
from ._errors import (
    AlreadyExistsError,
    ConflictError,
    DataLossError,
    NotFoundError,
    OutOfRangeError,
    PreconditionError,
    ResourceExhaustedError,
    SkillstateError,
    UnavailableError,
    ValidationError,
)
from ._sync import SyncStateClient
from ._types import (
    CreatedExecution,
    HistoryPage,
    Observation,
    PatchResult,
    Resolution,
    RevisionEvent,
    Snapshot,
    State,
)

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "DataLossError",
    "CreatedExecution",
    "HistoryPage",
    "NotFoundError",
    "Observation",
    "OutOfRangeError",
    "PatchResult",
    "PreconditionError",
    "Resolution",
    "ResourceExhaustedError",
    "RetryPolicy",
    "RevisionEvent",
    "SkillstateError",
    "Snapshot",
    "State",
    "StateClient",
    "SyncStateClient",
    "UnavailableError",
    "ValidationError",
]
