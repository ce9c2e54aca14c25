"""The public names of skillstate.agents are a contract: changing them must be deliberate."""

from __future__ import annotations

import skillstate.agents

EXPECTED = {
    "Agent", "Limits", "Recorder", "StepRecord",
    "RUNTIMES", "Context", "GroupChat", "Memory", "React", "SkillState", "Stateful", "Truncated",
    "Environment", "Notice", "Outcome", "Driver", "RepoEnvironment", "WarehouseEnvironment",
    "ENVIRONMENT", "SimConfig", "SimResult", "run_simulation",
    "SCRIPTED", "is_test_policy", "SummaryCapped",
    "TeamConfig", "TeamResult", "run_team", "Pace", "TeamAgent", "Coordination", "state_drift",
    "MacroFeedback",
}  # fmt: skip


def test_exported_members() -> None:
    assert set(skillstate.agents.__all__) == EXPECTED
    for name in EXPECTED:
        member = getattr(skillstate.agents, name)
        if callable(member):  # classes and functions; the rest are constants
            assert member.__module__.startswith("skillstate.agents.")
