"""The public names of skillstate.clients are a contract: changing them must be deliberate."""

from __future__ import annotations

import skillstate.clients

EXPECTED = {
    "AlreadyExistsError", "ConflictError", "CreatedExecution", "DataLossError", "HistoryPage", "NotFoundError",
    "Observation", "OutOfRangeError", "PatchResult", "PreconditionError", "Resolution", "ResourceExhaustedError",
    "RetryPolicy", "RevisionEvent", "SkillstateError", "Snapshot", "State", "StateClient", "StateJSON",
    "SyncStateClient",
    "UnavailableError", "ValidationError",
    "Diagnostic", "Hydrated", "HydratedMacro", "LibraryStats", "MacroRevision", "Registered", "Section", "Skill",
    "SkillRegistryClient", "SkillSummary",
    "ClientTLS", "PermissionDeniedError", "UnauthenticatedError", "open_channel",
    "PackageFiles", "PackageReadError", "read_package_dir",
    "Session", "SyncSession", "ExecutionPage", "ExecutionSummary",
}  # fmt: skip


def test_exported_members() -> None:
    assert set(skillstate.clients.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(skillstate.clients, name).__module__.startswith("skillstate.clients._")
