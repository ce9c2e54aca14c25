"""The Python client of a skillstate server (async first; `SyncStateClient` blocks).

async with StateClient("127.0.0.1:50051", token=os.environ.get("SKILLSTATE_TOKEN")) as client:
    created = await client.create_execution(schema={...}, initial_state={...})
    result = await client.submit_patch(created.execution_id, {"done": True}, agent_id="a", base_revision=0)

async with SkillRegistryClient("127.0.0.1:50051") as skills:
    await skills.register_folder("skills/ship-order")
    context = await skills.hydrate("ship the customer's order", budget_tokens=3000)
"""

from ._channel import ClientTLS, open_channel
from ._client import StateClient
from ._errors import (
    AlreadyExistsError,
    ConflictError,
    DataLossError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PreconditionError,
    ResourceExhaustedError,
    SkillstateError,
    UnauthenticatedError,
    UnavailableError,
    ValidationError,
)
from ._packages import PackageFiles, PackageReadError, read_package_dir
from ._retry import RetryPolicy
from ._session import Session
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
from ._sync import SyncSession, SyncStateClient
from ._types import (
    CreatedExecution,
    ExecutionPage,
    ExecutionSummary,
    HistoryPage,
    Observation,
    PatchResult,
    Resolution,
    RevisionEvent,
    Snapshot,
    State,
    StateJSON,
)

__all__ = [
    "AlreadyExistsError",
    "ClientTLS",
    "ConflictError",
    "DataLossError",
    "ExecutionPage",
    "ExecutionSummary",
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
    "PackageFiles",
    "PackageReadError",
    "PatchResult",
    "PermissionDeniedError",
    "PreconditionError",
    "Registered",
    "Resolution",
    "ResourceExhaustedError",
    "RetryPolicy",
    "RevisionEvent",
    "Section",
    "Session",
    "Skill",
    "SkillRegistryClient",
    "SkillSummary",
    "SkillstateError",
    "Snapshot",
    "State",
    "StateJSON",
    "StateClient",
    "SyncSession",
    "SyncStateClient",
    "UnauthenticatedError",
    "UnavailableError",
    "ValidationError",
    "open_channel",
    "read_package_dir",
]
