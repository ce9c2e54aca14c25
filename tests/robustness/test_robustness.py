"""The robustness suite in the test run: seeded runs with faults must break no guarantee, and the checker
must catch each kind of violation when one is planted in a real history."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures
from .history import OK, REJECTED, History
from .model import violations
from .traffic import RunConfig, run

SEEDS = (0, 1)
DURATION = 6.0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[History, dict[str, int]]]:
    return [asyncio.run(run(RunConfig(seed, DURATION), tmp_path_factory.mktemp(f"seed{seed}"))) for seed in SEEDS]


@pytest.mark.timeout(300)
def test_seeded_runs_with_faults_break_no_guarantee(runs: list[tuple[History, dict[str, int]]], tmp_path: Path) -> None:
    for history, counts in runs:
        found = violations(history)
        if found:
            history.write(tmp_path / "failed.jsonl")  # re-check: python -m tests.robustness check FILE
        assert found == [], f"history kept in {tmp_path / 'failed.jsonl'}"
        assert counts["sigkill"] >= 1 and counts["acknowledged_writes"] > 500 and counts["dropped_call"] >= 1
        assert counts["stream_cut"] >= 1


@pytest.mark.timeout(300)
def test_a_seeded_run_on_three_replicas_breaks_no_guarantee(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    """Three servers on one PostgreSQL database; agents, watchers and streams spread over them; each SIGKILL
    takes one down. Reads on one replica must still see what another acknowledged."""
    history, counts = asyncio.run(run(RunConfig(7, DURATION, database=postgres_url, replicas=3), tmp_path))
    found = violations(history)
    if found:
        history.write(tmp_path / "failed.jsonl")
    assert found == [], f"history kept in {tmp_path / 'failed.jsonl'}"
    assert counts["sigkill"] >= 1 and counts["acknowledged_writes"] > 300


def saved_and_read_back(history: History, tmp_path: Path) -> History:
    history.write(tmp_path / "history.jsonl")
    return History.read(tmp_path / "history.jsonl")


def test_a_saved_history_checks_the_same(runs: list[tuple[History, dict[str, int]]], tmp_path: Path) -> None:
    history, _ = runs[0]
    assert violations(saved_and_read_back(history, tmp_path)) == violations(history) == []


def acknowledged(history: History, policy: str | None = None) -> list[dict[str, Any]]:
    return [s for s in history.of("submit") if s["outcome"] == OK and policy in (None, s["policy"])]


def lose_the_last_acknowledged_write(h: History) -> None:
    last = max(acknowledged(h), key=lambda s: s["revision"])
    log = h.one("final_log")["revisions"]
    log[last["revision"] - 1]["state_hash"] = "0" * 64


def show_a_state_no_revision_had(h: History) -> None:
    read = next(r for r in h.of("read") if r["outcome"] == OK and r["revision"] > 0)
    read["state"]["count"] += 1


def serve_a_stale_read(h: History) -> None:
    read = max((r for r in h.of("read") if r["outcome"] == OK), key=lambda r: r["revision"])
    read["revision"], read["state"], read["hash"] = 0, h.one("created")["initial"], h.one("created")["hash"]


def commit_a_refused_patch(h: History) -> None:
    acknowledged(h)[0]["outcome"] = REJECTED


def count_a_delta_twice(h: History) -> None:
    acknowledged(h, "counter")[0]["delta"] += 1


def drop_an_element(h: History) -> None:
    acknowledged(h, "set")[0]["element"] = "never-written"


def lose_a_line_of_text(h: History) -> None:
    acknowledged(h, "text")[0]["element"] = "never-written"


def raise_the_max(h: History) -> None:
    acknowledged(h, "max")[0]["value"] = 2_000_000


def repeat_a_watch_event(h: History) -> None:
    events = h.of("watch")[0]["events"]
    events.insert(5, events[4])


def skip_a_watch_event(h: History) -> None:
    del h.of("watch")[1]["events"][7]


def lose_an_observation(h: History) -> None:
    stream = next(s for s in h.of("stream") if s["received"])
    del stream["received"][0]


def reorder_observations(h: History) -> None:
    received = next(s for s in h.of("stream") if len(s["received"]) > 2)["received"]
    received[0], received[1] = received[1], received[0]


PLANTED: dict[str, tuple[Callable[[History], None], str]] = {
    "lost write": (lose_the_last_acknowledged_write, "lost write"),
    "state no revision had": (show_a_state_no_revision_had, "does not replay to"),
    "stale read": (serve_a_stale_read, "stale read"),
    "refused patch committed": (commit_a_refused_patch, "which was refused"),
    "counter": (count_a_delta_twice, "counter:"),
    "set": (drop_an_element, "set:"),
    "text": (lose_a_line_of_text, "text:"),
    "max": (raise_the_max, "max:"),
    "watch repeat": (repeat_a_watch_event, "where"),
    "watch gap": (skip_a_watch_event, "where"),
    "observation lost": (lose_an_observation, "never arrived"),
    "observations reordered": (reorder_observations, "out of order"),
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_the_checker_catches_a_planted_violation(runs: list[tuple[History, dict[str, int]]], planted: str) -> None:
    history = History(copy.deepcopy(runs[0][0].entries))
    plant, expected = PLANTED[planted]
    plant(history)
    assert any(expected in line for line in violations(history)), violations(history)
