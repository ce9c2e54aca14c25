"""The robustness suite in the test run: seeded runs with faults must break no guarantee; the fault guards
must reject a run whose traffic had no fault; and every check of the reference model must catch the
violation planted for it in a real history (the table in docs/guarantees.md lists them)."""

from __future__ import annotations

import ast
import asyncio
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..postgres import postgres_schema, postgres_url  # noqa: F401 - fixtures
from . import model
from .history import FAULTS, OK, RACING, REJECTED, UNKNOWN, History, missing_faults, same_agent_races
from .model import NEVER_CONFLICT, merge_patch, violations
from .runner import run
from .traffic import SESSION_OBSERVER, RunConfig

SEEDS = (0, 1)
DURATION = 6.0
ENOUGH_WRITES = 300
"""A run that acknowledged fewer writes checked too little to count (a floor on coverage, far below what
a run does on an idle machine: throughput is bench/'s business, not a test's)."""
ENOUGH_SESSION_WRITES = 60
"""The same floor for the writes acknowledged through sessions."""


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
        assert missing_faults(history) == []
        assert counts["acknowledged_writes"] > ENOUGH_WRITES
        assert all(counts[f"raced_{policy}"] for policy in RACING), "a run without same-agent races checked none"
        assert counts["session_writes"] > ENOUGH_SESSION_WRITES
        assert counts["resubmitted"], "no submit was sent again after its stream was dropped"


def test_same_agent_races_are_counted_only_where_an_agents_patches_raced(
    runs: list[tuple[History, dict[str, int]]],
) -> None:
    """The race guard counts bursts whose patches were settled against each other, and nothing in a history
    whose writes were all sent one at a time."""
    history, counts = runs[0]
    assert same_agent_races(history) == {policy: counts[f"raced_{policy}"] for policy in RACING}
    one_at_a_time = History(pickle.loads(pickle.dumps(history.entries)))
    for submit in one_at_a_time.of("submit"):
        submit.pop("burst", None)
    assert same_agent_races(one_at_a_time) == dict.fromkeys(RACING, 0)


@pytest.mark.timeout(300)
def test_a_seeded_run_unloading_its_execution_whenever_it_is_idle_breaks_no_guarantee(tmp_path: Path) -> None:
    """The servers keep no idle execution in memory (`--max-loaded-executions 0`) and nothing holds it during
    the traffic (no stream, no session: both keep their execution in memory): between calls it is unloaded,
    and the next call loads it again from the log. The streams open when the traffic ends and read it all back
    (so no stream or session is cut during the traffic)."""
    config = RunConfig(5, DURATION, session_agents=0, max_loaded_executions=0, streams_during_traffic=False)
    history, counts = asyncio.run(run(config, tmp_path))
    found = violations(history)
    if found:
        history.write(tmp_path / "failed.jsonl")
    assert found == [], f"history kept in {tmp_path / 'failed.jsonl'}"
    assert missing_faults(history) == ["no stream cut during the traffic", "no session cut during the traffic"]
    assert counts["acknowledged_writes"] > ENOUGH_WRITES
    assert all(counts[f"raced_{policy}"] for policy in RACING), "a run without same-agent races checked none"


@pytest.mark.timeout(300)
def test_a_seeded_run_on_three_replicas_breaks_no_guarantee(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    """Three servers on one PostgreSQL database; agents, watchers and streams spread over them; each SIGKILL
    takes one down, and with it the executions it owns, which others take over. Reads on one replica must
    still see what another acknowledged."""
    history, counts = asyncio.run(run(RunConfig(7, DURATION, database=postgres_url, replicas=3), tmp_path))
    assert asyncio.run(taken_over(postgres_url)) > 0, "no SIGKILL took an owner down"
    found = violations(history)
    if found:
        history.write(tmp_path / "failed.jsonl")
    assert found == [], f"history kept in {tmp_path / 'failed.jsonl'}"
    assert missing_faults(history) == []
    assert counts["acknowledged_writes"] > ENOUGH_WRITES / 2
    assert all(counts[f"raced_{policy}"] for policy in RACING), "a run without same-agent races checked none"
    assert counts["session_writes"] > ENOUGH_SESSION_WRITES / 2
    assert counts["resubmitted"], "no submit was sent again after its stream was dropped"


@pytest.mark.timeout(120)
def test_a_run_without_faults_in_its_traffic_fails_the_fault_guards(tmp_path: Path) -> None:
    """The run still ends with a SIGKILL, which cuts every stream: neither counts, as neither hit traffic."""
    history, counts = asyncio.run(run(RunConfig(3, 2.0, faults=False), tmp_path))
    assert missing_faults(history) == [f"no {what} during the traffic" for what in FAULTS]
    assert counts["sigkill"] == counts["dropped_call"] == counts["reconnect"] == counts["stream_cut"] == 0
    assert counts["session_cut"] == counts["resubmitted"] == 0
    (traffic,) = history.of("traffic")
    after = [f["what"] for f in history.of("fault") if f["at"] > traffic["end"]]
    assert "sigkill" in after and "stream cut" in after


async def taken_over(url: str) -> int:
    """Executions whose lease changed hands (an owner died, or restarted under a new id) in the schema of a run."""
    import asyncpg

    dsn, _, schema = url.partition("?search_path=")
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        return int(await connection.fetchval("SELECT count(*) FROM leases WHERE epoch > 1"))
    finally:
        await connection.close()


def saved_and_read_back(history: History, tmp_path: Path) -> History:
    history.write(tmp_path / "history.jsonl")
    return History.read(tmp_path / "history.jsonl")


def test_a_saved_history_checks_the_same(runs: list[tuple[History, dict[str, int]]], tmp_path: Path) -> None:
    history, _ = runs[0]
    assert violations(saved_and_read_back(history, tmp_path)) == violations(history) == []


# -- planted violations: each mutates a real history so that it breaks one check ---------------------------


def requests(h: History) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in h.of("submit")}


def acknowledged(h: History, policy: str | None = None) -> list[dict[str, Any]]:
    return [s for s in h.of("submit") if s["outcome"] == OK and policy in (None, s["policy"])]


def refused(h: History, policy: str, status: str) -> list[dict[str, Any]]:
    return [s for s in h.of("submit") if s["outcome"] == REJECTED and (s["policy"], s["status"]) == (policy, status)]


def log_of(h: History) -> list[dict[str, Any]]:
    return h.one("final_log")["revisions"]


def committed(h: History, policy: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(revision, request) for every logged revision of a request of `policy`."""
    by_id = requests(h)
    return [(r, by_id[r["client_patch_id"]]) for r in log_of(h) if by_id[r["client_patch_id"]]["policy"] == policy]


def commit_one_more(h: History, request_id: str, agent: str, base: int, applied_patch: dict[str, Any]) -> None:
    """A revision appended to the log, the final state and every watch following it as the server would."""
    log, final = log_of(h), h.one("final_state")
    number = len(log) + 1
    state_hash = f"{number:064x}"
    log.append(
        {
            "revision": number,
            "agent_id": agent,
            "base_revision": base,
            "applied_patch": applied_patch,
            "state_hash": state_hash,
            "client_patch_id": request_id,
        }
    )
    final.update(revision=number, state=merge_patch(final["state"], applied_patch), hash=state_hash)
    for watch in h.of("watch"):
        watch["events"].append((number, state_hash))


def unanswered(request: dict[str, Any]) -> dict[str, Any]:
    request.update(outcome=UNKNOWN, status="DEADLINE_EXCEEDED")
    return request


def repeat_the_last_revision(h: History) -> None:
    log_of(h).append(dict(log_of(h)[-1]))


def misstate_the_final_revision(h: History) -> None:
    h.one("final_state")["revision"] -= 1


def misstate_the_final_state(h: History) -> None:
    h.one("final_state")["state"]["count"] += 1


def acknowledge_a_revision_never_logged(h: History) -> None:
    max(acknowledged(h), key=lambda s: s["revision"])["revision"] = len(log_of(h)) + 1


def acknowledge_another_requests_revision(h: History) -> None:
    writes = acknowledged(h)
    writes[len(writes) // 2]["revision"] -= 1


def commit_a_revision_nobody_requested(h: History) -> None:
    commit_one_more(h, "nobody-1", "agent-0", len(log_of(h)), {})


def commit_a_refused_patch(h: History) -> None:
    acknowledged(h)[0].update(outcome=REJECTED, status="INVALID_ARGUMENT")


def log_another_agent(h: History) -> None:
    committed(h, "counter")[0][0]["agent_id"] = "agent-9"


def log_another_base(h: History) -> None:
    committed(h, "counter")[-1][0]["base_revision"] += 1


def commit_a_request_twice(h: History) -> None:
    _, request = committed(h, "set")[0]
    commit_one_more(h, request["id"], request["agent"], request["base"], {})


def commit_a_patch_the_schema_refuses(h: History) -> None:
    request = unanswered(refused(h, "invalid", "INVALID_ARGUMENT")[0])
    commit_one_more(h, request["id"], request["agent"], request["base"], request["patch"])


def read_beyond_the_log(h: History) -> None:
    next(r for r in h.of("read") if r["outcome"] == OK)["revision"] = len(log_of(h)) + 1


def show_a_state_no_revision_had(h: History) -> None:
    read = next(r for r in h.of("read") if r["outcome"] == OK and r["revision"] > 0)
    read["state"]["count"] += 1


def read_another_hash(h: History) -> None:
    next(r for r in h.of("read") if r["outcome"] == OK and r["revision"] > 0)["hash"] = "0" * 64


def serve_a_stale_read(h: History) -> None:
    read = max((r for r in h.of("read") if r["outcome"] == OK), key=lambda r: r["revision"])
    read["revision"], read["state"], read["hash"] = 0, h.one("created")["initial"], h.one("created")["hash"]


def read_a_write_before_it_was_sent(h: History) -> None:
    read = next(r for r in h.of("read") if r["outcome"] == OK and r["revision"] > 0)
    writer = requests(h)[log_of(h)[read["revision"] - 1]["client_patch_id"]]
    read["start"] = read["end"] = writer["start"] - 0.001


def count_a_delta_twice(h: History) -> None:
    acknowledged(h, "counter")[0]["delta"] += 1


def drop_an_element(h: History) -> None:
    acknowledged(h, "set")[0]["element"] = "never-written"


def drop_an_event(h: History) -> None:
    acknowledged(h, "append")[0]["element"] = "never-written"


def append_out_of_commit_order(h: History) -> None:
    first, second = (request for _, request in committed(h, "append")[:2])
    first["element"], second["element"] = second["element"], first["element"]


def lose_a_line_of_text(h: History) -> None:
    acknowledged(h, "text")[0]["element"] = "never-written"


def let_a_smaller_stamp_win(h: History) -> None:
    """The write holding a key at the end claims another value: at its revision the state kept a smaller stamp."""
    element = next(iter(h.one("final_state")["state"]["inventory"].values()))
    next(r for _, r in committed(h, "lww") if r["element"] == element)["element"] = "never-written"


def give_an_lww_tie_to_the_earlier_commit(h: History) -> None:
    """The same agent writes the key again from the same base; the server keeps the earlier commit's value."""
    key, element = next(iter(h.one("final_state")["state"]["inventory"].items()))
    revision, winner = next((v, r) for v, r in committed(h, "lww") if r["element"] == element)
    h.add(
        "submit",
        id="tie-1",
        agent=winner["agent"],
        base=winner["base"],
        policy="lww",
        key=key,
        element="tie-1",
        patch={"inventory": {key: "tie-1"}},
        start=winner["end"],
        end=winner["end"],
        outcome=UNKNOWN,
        status="DEADLINE_EXCEEDED",
    )
    commit_one_more(h, "tie-1", revision["agent_id"], revision["base_revision"], {})


def raise_the_max(h: History) -> None:
    acknowledged(h, "max")[0]["value"] = 2_000_000


def lower_the_min(h: History) -> None:
    acknowledged(h, "min")[0]["value"] = -1


def merge_a_conflicting_reject_write(h: History) -> None:
    """A stale write to a `reject` path, refused because another write changed that path since its base,
    committed instead (its answer lost)."""
    doc = h.one("final_state")["state"]["doc"]
    request = next(q for q in refused(h, "reject", "ABORTED") if not q["patch"]["doc"].items() <= doc.items())
    unanswered(request)
    commit_one_more(h, request["id"], request["agent"], request["base"], request["patch"])


def refuse_a_reject_write_that_raced_nothing(h: History) -> None:
    refused(h, "reject", "ABORTED")[0]["base"] = len(log_of(h))


def refuse_a_write_that_never_conflicts(policy: str) -> Callable[[History], None]:
    def plant(h: History) -> None:
        h.add(
            "submit",
            id=f"refused-{policy}",
            agent="agent-0",
            base=0,
            policy=policy,
            patch={},
            start=0.0,
            end=0.0,
            outcome=REJECTED,
            status="ABORTED",
        )

    return plant


def repeat_a_watch_event(h: History) -> None:
    events = h.of("watch")[0]["events"]
    events.insert(5, events[4])


def skip_a_watch_event(h: History) -> None:
    del h.of("watch")[1]["events"][7]


def watch_another_hash(h: History) -> None:
    events = h.of("watch")[0]["events"]
    events[3] = (events[3][0], "0" * 64)


def end_a_watch_early(h: History) -> None:
    h.of("watch")[2]["events"].pop()


def reorder_observations(h: History) -> None:
    received = next(s for s in h.of("stream") if len(s["received"]) > 2)["received"]
    received[0], received[1] = received[1], received[0]


def repeat_an_observation(h: History) -> None:
    received = next(s for s in h.of("stream") if len(s["received"]) > 2)["received"]
    received.insert(1, received[0])


def deliver_an_observation_never_published(h: History) -> None:
    received = next(s for s in h.of("stream") if s["received"])["received"]
    received[0] = (received[0][0], "never-published")


def deliver_a_refused_publish(h: History) -> None:
    _, payload_id = next(s for s in h.of("stream") if s["received"])["received"][0]
    next(p for p in h.of("publish") if p["id"] == payload_id)["outcome"] = REJECTED


def deliver_an_observation_addressed_elsewhere(h: History) -> None:
    _, payload_id = next(s for s in h.of("stream") if s["received"])["received"][0]
    next(p for p in h.of("publish") if p["id"] == payload_id)["to"] = "nobody"


def lose_an_observation(h: History) -> None:
    acknowledged_ids = {p["id"] for p in h.of("publish") if p["outcome"] == OK}
    received = next(s for s in h.of("stream") if s["received"])["received"]
    received.remove(next(item for item in received if item[1] in acknowledged_ids))


def through_sessions(h: History, via: str | None = None) -> list[dict[str, Any]]:
    """The submits sent through sessions (`via` one kind: "session", the SDK; "raw session", the raw stub)."""
    return [s for s in h.of("submit") if s.get("via") is not None and via in (None, s["via"])]


def swap_two_answers(h: History) -> None:
    answered = next(s for s in h.of("session") if len(s["answered"]) >= 2)["answered"]
    answered[0], answered[1] = answered[1], answered[0]


def answer_a_submit_twice(h: History) -> None:
    answered = next(s for s in h.of("session") if s["answered"])["answered"]
    answered.insert(1, answered[0])


def end_a_session_with_submits_unanswered(h: History) -> None:
    next(s for s in h.of("session") if s.get("ended") == "OK" and s["answered"])["answered"].pop()


def apply_a_resubmission_twice(h: History) -> None:
    """A raw session's submit, sent again after a drop (if one was that committed a `set` element: a second
    commit of it breaks nothing else), committed again."""
    logged = {r["client_patch_id"] for r in log_of(h)}
    candidates = [s for s in through_sessions(h, "raw session") if s["id"] in logged and s["policy"] == "set"]
    request = max(candidates, key=lambda s: s["sends"])
    commit_one_more(h, request["id"], request["agent"], request["base"], {})


def commit_a_refused_session_submit(h: History) -> None:
    next(s for s in through_sessions(h) if s["outcome"] == OK).update(outcome=REJECTED, status="INVALID_ARGUMENT")


def answer_a_duplicate_with_another_hash(h: History) -> None:
    """The answer to a submit sent again after a drop (one answered as a duplicate, if any was) carries
    another hash than the revision it committed the first time."""
    request = max((s for s in through_sessions(h) if s["outcome"] == OK), key=lambda s: s.get("duplicate", False))
    request["hash"] = "0" * 64


def skip_a_revision_over_a_session(h: History) -> None:
    del next(w for w in h.of("watch") if w["client"] == SESSION_OBSERVER)["events"][7]


def lose_an_observation_over_a_session(h: History) -> None:
    acknowledged_ids = {p["id"] for p in h.of("publish") if p["outcome"] == OK}
    received = next(s for s in h.of("stream") if s["client"] == SESSION_OBSERVER)["received"]
    received.remove(next(item for item in received if item[1] in acknowledged_ids))


@dataclass(frozen=True)
class Planted:
    plant: Callable[[History], None]
    message: str
    """A pattern of the message of the check the plant breaks."""
    also: tuple[str, ...] = ()
    """Patterns of other checks that this violation necessarily breaks too."""


PLANTED: dict[str, Planted] = {
    "log: a revision repeated": Planted(
        repeat_the_last_revision,
        r"log: revision (\d+) where \d+ was expected",
        # and when the repeated revision wrote a reject path from a stale base, it merged over its own write
        also=(r"request \S+ committed 2 revisions", r"reject: revision \d+ merged \S+, written from base \d+, over"),
    ),
    "final state: another revision": Planted(misstate_the_final_revision, r"final state: revision \d+, but the log"),
    "final state: another state": Planted(misstate_the_final_state, r"final state: differs from the replay"),
    "lost write: never logged": Planted(
        acknowledge_a_revision_never_logged,
        r"lost write: \S+ was acknowledged as revision \d+, which the log lacks",
        also=(r"stale read: ",),
    ),
    "lost write: logged for another": Planted(
        acknowledge_another_requests_revision, r"lost write: revision \d+ was acknowledged to \S+ with hash"
    ),
    "phantom revision": Planted(
        commit_a_revision_nobody_requested, r"phantom revision \d+: no request has id nobody-1"
    ),
    "refused patch committed": Planted(
        commit_a_refused_patch, r"revision \d+ applies \S+, which was refused INVALID_ARGUMENT"
    ),
    "revision: another agent": Planted(log_another_agent, r"revision \d+: agent agent-9 from base \d+, sent by"),
    "revision: another base": Planted(log_another_base, r"revision \d+: agent \S+ from base \d+, sent by"),
    "request committed twice": Planted(commit_a_request_twice, r"request \S+ committed 2 revisions"),
    "invalid patch committed": Planted(
        commit_a_patch_the_schema_refuses, r"revision \d+ applies \S+, which the schema refuses", also=(r"counter: ",)
    ),
    "read beyond the log": Planted(read_beyond_the_log, r"read at [\d.]+s saw revision \d+, beyond the log's \d+"),
    "read: a state no revision had": Planted(show_a_state_no_revision_had, r"read of revision \d+ saw a state that"),
    "read: another hash": Planted(read_another_hash, r"read of revision \d+: hash 000000000000, the log's"),
    "stale read": Planted(serve_a_stale_read, r"stale read: revision 0 at"),
    "read before the write": Planted(read_a_write_before_it_was_sent, r"read of revision \d+ ended before the write"),
    "counter": Planted(count_a_delta_twice, r"counter: the state holds \d+, the committed deltas sum to \d+"),
    "set": Planted(drop_an_element, r"set: the state lacks \d+ committed elements \(e\.g\. "),
    "append": Planted(drop_an_event, r"append: the state lacks \d+ committed elements \(e\.g\. "),
    "append: out of commit order": Planted(
        append_out_of_commit_order, r"append: every committed element is there once, but not in commit order \(from"
    ),
    "text": Planted(lose_a_line_of_text, r"text: the state lacks \d+ committed elements \(e\.g\. "),
    "lww: a smaller stamp won": Planted(let_a_smaller_stamp_win, r"lww: revision \d+ left shelf_\d .*'never-written'$"),
    "lww: a tie to the earlier commit": Planted(
        give_an_lww_tie_to_the_earlier_commit, r"lww: revision \d+ left shelf_\d .*'tie-1'$"
    ),
    "max": Planted(raise_the_max, r"max: revision \d+ made high \d+, not 2000000"),
    "min": Planted(lower_the_min, r"min: revision \d+ made low \d+, not -1"),
    "reject: a conflict merged": Planted(
        merge_a_conflicting_reject_write, r"reject: revision \d+ merged \S+, written from base \d+, over revision"
    ),
    "reject: refused, no conflict": Planted(
        refuse_a_reject_write_that_raced_nothing,
        r"reject: \S+ was refused ABORTED, though nothing wrote doc\.k\d since",
    ),
    **{
        f"{policy}: refused": Planted(
            refuse_a_write_that_never_conflicts(policy),
            rf"{policy}: refused-{policy} was refused ABORTED, a write that never conflicts",
        )
        for policy in NEVER_CONFLICT
    },
    "watch: a repeat": Planted(repeat_a_watch_event, r"watch watch-0: revision \d+ where \d+ was due"),
    "watch: a gap": Planted(skip_a_watch_event, r"watch watch-1: revision \d+ where \d+ was due"),
    "watch: another hash": Planted(watch_another_hash, r"watch watch-0: revision 4 with a hash the log does not"),
    "watch: ended early": Planted(end_a_watch_early, r"watch watch-2: ended at revision \d+, the log at \d+"),
    "observations: reordered": Planted(reorder_observations, r"observations to \S+: out of order or repeated"),
    "observations: repeated": Planted(repeat_an_observation, r"observations to \S+: out of order or repeated"),
    "observations: never published": Planted(
        deliver_an_observation_never_published, r"observations to \S+: sequence \d+ is not one published to it"
    ),
    "observations: publish refused": Planted(
        deliver_a_refused_publish, r"observations to \S+: sequence \d+ is not one published to it"
    ),
    "observations: to another": Planted(
        deliver_an_observation_addressed_elsewhere, r"observations to \S+: sequence \d+ is not one published to it"
    ),
    "observations: lost": Planted(lose_an_observation, r"observations to \S+: 1 acknowledged ones never arrived"),
    "observations: lost over a session": Planted(
        lose_an_observation_over_a_session, r"observations to obs-session: 1 acknowledged ones never arrived"
    ),
    "watch: a gap over a session": Planted(
        skip_a_revision_over_a_session, r"watch obs-session: revision \d+ where \d+ was due"
    ),
    "session: answers swapped": Planted(
        swap_two_answers, r"session \S+ stream \d+: answer 1 was to \S+, where the answer to \S+ was due"
    ),
    "session: an answer repeated": Planted(
        answer_a_submit_twice, r"session \S+ stream \d+: answer 2 was to \S+, where the answer to \S+ was due"
    ),
    "session: ended unanswered": Planted(
        end_a_session_with_submits_unanswered, r"session \S+ stream \d+: ended OK after answering \d+ of its \d+"
    ),
    "session: a resubmission applied twice": Planted(apply_a_resubmission_twice, r"request \S+ committed 2 revisions"),
    "session: a refused submit committed": Planted(
        commit_a_refused_session_submit, r"revision \d+ applies \S+, which was refused INVALID_ARGUMENT"
    ),
    "session: a duplicate with another hash": Planted(
        answer_a_duplicate_with_another_hash, r"lost write: revision \d+ was acknowledged to \S+ with hash 000000000000"
    ),
}


@pytest.fixture(scope="module")
def checked(runs: list[tuple[History, dict[str, int]]]) -> tuple[bytes, list[str]]:
    """The cleanest run's history, pickled to be copied for each plant, and what the checker finds in it:
    nothing, unless the server broke a guarantee (then the seeded-run test fails, and the plants are judged
    by what they add)."""
    history = min((history for history, _ in runs), key=lambda history: len(violations(history)))
    return pickle.dumps(history.entries), violations(history)


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_the_checker_catches_a_planted_violation(checked: tuple[bytes, list[str]], planted: str) -> None:
    """The planted violation is reported with its check's message, and nothing else is (but the checks it
    necessarily breaks too)."""
    entries, before = checked
    history = History(pickle.loads(entries))
    case = PLANTED[planted]
    case.plant(history)
    found = [line for line in violations(history) if line not in before]
    assert any(re.match(case.message, line) for line in found), found
    assert all(any(re.match(pattern, line) for pattern in (case.message, *case.also)) for line in found), found


def test_every_check_is_listed_with_its_planted_violations() -> None:
    """docs/guarantees.md has a row for each check of the model (each place that reports a violation),
    naming the plants above that prove it: a check added without a row, or a row without a plant, fails."""
    tree = ast.parse(Path(model.__file__).read_text())
    checks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in (("found", "append"), ("found", "extend"))
    ]
    docs = (Path(__file__).parents[2] / "docs" / "guarantees.md").read_text()
    table = docs.split("### What the checker checks", 1)[1].split("\n#", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = [name for row in rows for name in re.findall(r"`([^`]+)`", row.rstrip(" |").rsplit("|", 1)[1])]
    assert len(rows) == len(checks)
    assert sorted(named) == sorted(PLANTED)
