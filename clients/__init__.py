"""The Python client of a skillstate server (async first; `SyncStateClient` blocks).

async with StateClient("127.0.0.1:50051") as client:
    created = await client.create_execution(schema={...}, initial_state={...})
    result = await client.submit_patch(created.execution_id, {"done": True}, agent_id="a", base_revision=0)

async with SkillRegistryClient("127.0.0.1:50051") as skills:
    context = await skills.hydrate("ship the customer's order", budget_tokens=3000)
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
from ._skill_types import (
    Diagnostic,
    Hydrated,
    HydratedMacro,
    LibraryStats,
    MacroRevision,
    Registered,
    Section,
    Skill,
    SkillSummary,
)
from ._skills import SkillRegistryClient
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
    "Diagnostic",
    "HistoryPage",
    "Hydrated",
    "HydratedMacro",
    "LibraryStats",
    "MacroRevision",
    "NotFoundError",
    "Observation",
    "OutOfRangeError",
    "PatchResult",
    "PreconditionError",
    "Registered",
    "Resolution",
    "ResourceExhaustedError",
    "RetryPolicy",
    "RevisionEvent",
    "Section",
    "Skill",
    "SkillRegistryClient",
    "SkillSummary",
    "SkillstateError",
    "Snapshot",
    "State",
    "StateClient",
    "SyncStateClient",
    "UnavailableError",
    "ValidationError",
]
