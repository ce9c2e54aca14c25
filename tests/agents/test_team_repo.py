"""The software repository on its own clock: feature requests, and the webhooks an action sets off, to agents
working at once; their count of merges under `counter` against the world's books (the scripted test policy,
through a real server)."""

from __future__ import annotations

import os

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.envs.clock import Pace
from skillstate.agents.envs.repo import CI, DEVELOPER, MAINTAINER
from skillstate.agents.envs.timed_repo import CI_TICKS, TimedRepo
from skillstate.agents.sims.concurrent import run_team

from .test_team import quick

BUNCHED = Pace(tick_ms=50, rate=4.0, deadline=60)
"""Requests arriving together, so that maintainers merge at once."""


def test_an_action_sets_off_the_next_webhook_at_its_tick() -> None:
    world = TimedRepo(1, [1], deadline=9, seed=3)
    (request,) = world.due(1)
    assert (request.skill, request.text) == (DEVELOPER, "Feature request #1: add search.py on branch feature-1.")
    assert world.act(request.event_id, "Commit feature-1 search.py").handled and world.events == 2
    (pushed,) = world.due(2)
    assert pushed.skill == DEVELOPER and pushed.text.startswith("Pushed to feature-1") and pushed.tick == 2
    assert world.act(pushed.event_id, "CreatePR feature-1").handled
    assert world.due(2 + CI_TICKS - 1) == [], "CI takes its ticks"
    (ci,) = world.due(2 + CI_TICKS)
    if ci.skill == CI:  # the first run failed (a seeded chance): fixing it makes CI report again
        assert world.act(ci.event_id, "FixCI feature-1").handled
        (ci,) = world.due(2 + 2 * CI_TICKS)
    assert ci.skill == MAINTAINER and ci.text == "CI Pipeline Passed for PR #1 (feature-1): ready to merge."
    assert world.act(ci.event_id, "Merge 1").handled and world.unannounced() == 0
    assert world.books() == {"features": {"1": {"file": "search.py", "branch": "feature-1", "pr": 1, "ci": "passed"}},
                             "merged": 1}  # fmt: skip


async def test_agents_at_once_merge_every_feature_and_count_the_merges_together(server_address: str) -> None:
    summary = (
        await run_team(server_address, quick(env="repo", agents_per_skill=2, horizon=10, pace=BUNCHED))
    ).summary()
    assert summary["state_drift"] == [] and summary["dropped"] == 0 and summary["duplicate_actions"] == 0
    assert summary["events"] > 3 * 10, "a request, its push, its CI and its merge at least"
    assert summary["resolutions"].get("counter", 0) > 0, "maintainers merged at once: both merges counted"


@pytest.mark.parametrize("policy", ["lww", "reject"])
async def test_a_count_of_merges_under_another_policy_drifts(server_address: str, policy: str) -> None:
    config = quick(env="repo", agents_per_skill=2, horizon=10, pace=BUNCHED, policies={"merged": policy})
    summary = (await run_team(server_address, config)).summary()
    assert "/merged" in summary["state_drift"], summary
