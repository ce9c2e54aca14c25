"""The software repository environment: feature requests to merges through webhooks, and state recovery."""

from __future__ import annotations

import re

import pytest

from skillstate.agents.envs.base import Notice
from skillstate.agents.envs.repo import CI, DEVELOPER, MAINTAINER, SCENARIOS, RepoEnvironment
from skillstate.agents.sims.sequential import SimConfig, run_simulation
from skillstate.clients import StateClient


def oracle(notice: Notice, files: dict[str, str]) -> str:
    """The right answer to each webhook (what a perfect agent does)."""
    if request := re.search(r"Feature request #\d+: add (\S+) on branch (\S+)\.", notice.text):
        files[request.group(2)] = request.group(1)
        return f"Commit {request.group(2)} {request.group(1)}"
    if pushed := re.search(r"Pushed to (\S+) ", notice.text):
        return f"CreatePR {pushed.group(1)}"
    if failed := re.search(r"PR #\d+ \((\S+)\)(?: and)? failed|Failed for PR #\d+ \((\S+)\)", notice.text):
        return f"FixCI {failed.group(1) or failed.group(2)}"
    if passed := re.search(r"Passed for PR #(\d+)", notice.text):
        return f"Merge {passed.group(1)}"
    if forced := re.search(r"force-pushed (\S+);", notice.text):
        return f"Commit {forced.group(1)} {files[forced.group(1)]}"
    if closed := re.search(r"\((\S+)\) was closed", notice.text):
        return f"CreatePR {closed.group(1)}"
    raise AssertionError(f"unexpected webhook: {notice.text}")


def run(environment: RepoEnvironment) -> list[tuple[Notice, str]]:
    files: dict[str, str] = {}
    steps = []
    while (notice := environment.next_notice()) is not None:
        action = oracle(notice, files)
        assert environment.act(notice, action).status == "ok", (notice, action)
        steps.append((notice, action))
    return steps


def test_a_perfect_team_merges_every_feature_with_ci_passing() -> None:
    environment = RepoEnvironment(horizon=60, seed=5)
    steps = run(environment)
    merged, requested = environment.score()
    assert merged == requested >= 10
    assert {notice.skill for notice, _ in steps} == {DEVELOPER, CI, MAINTAINER}
    assert any(action.startswith("FixCI") for _, action in steps)  # some first runs fail, as seeded
    assert not environment.world.main_broken
    assert run(RepoEnvironment(horizon=60, seed=5)) == steps  # seeded: the same again


def test_merging_before_ci_passes_breaks_main_and_does_not_count() -> None:
    environment = RepoEnvironment(horizon=1, seed=0)
    request = environment.next_notice()
    assert request is not None
    environment.act(request, "Commit feature-1 search.py")
    environment.act(environment.next_notice(), "CreatePR feature-1")  # type: ignore[arg-type]
    environment.world.pulls[1].ci = "failed"
    outcome = environment.act(request, "Merge 1")
    assert (outcome.status, outcome.handled) == ("ok", False) and "main is broken" in outcome.result
    assert environment.score() == (0, 1) and environment.world.main_broken


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("Deploy feature-1", "Unknown action 'Deploy'"),
        ("Commit feature-1", "Commit takes 2 arguments, got 1"),
        ("Commit main x.py", "not to main"),
        ("CreatePR feature-9", "no feature branch 'feature-9'"),
        ("FixCI feature-1", "No pull request is open for feature-1"),
        ("Merge 7", "PR #7 is not an open pull request"),
    ],
)
def test_invalid_actions_change_nothing_and_say_why(action: str, reason: str) -> None:
    environment = RepoEnvironment(horizon=1, seed=0)
    request = environment.next_notice()
    assert request is not None
    before = (dict(environment.world.branches), dict(environment.world.pulls))
    outcome = environment.act(request, action)
    assert outcome.status == "error" and reason in outcome.result, outcome
    assert (environment.world.branches, environment.world.pulls) == before


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recovery_scenario_alerts_once_and_a_recovering_team_still_merges(scenario: str) -> None:
    environment = RepoEnvironment(horizon=20, seed=2, scenario=scenario)
    steps = run(environment)
    alerts = [notice for notice, _ in steps if notice.text.startswith("Alert:")]
    assert len(alerts) == 1
    recovery = environment.recovery()
    assert recovery is not None and recovery["recovered"] and recovery["recovery_steps"] >= 1
    merged, requested = environment.score()
    assert merged == requested


async def test_three_agents_run_the_repository_through_the_server(server_address: str) -> None:
    result = await run_simulation(server_address, SimConfig(env="repo", horizon=16, seed=1, scenario="flaky-ci"))
    assert result.score == 1.0 and result.events >= 4
    assert result.recovery is not None and result.recovery["recovered"]
    async with StateClient(server_address) as client:
        state = await client.get_state(result.execution_id)
    features = state.state["features"]
    assert len(features) == result.events
    assert all(entry["branch"] == f"feature-{number}" for number, entry in features.items())
    assert {r.agent for r in result.records} == {"developer", "ci", "maintainer"}
