"""The reference model a robustness history is checked against: one execution is a document, a sequence of
revisions each applying an RFC 7396 merge patch, and the merge policies' promises. Written from the
specification (docs/guarantees.md, docs/merge.md), sharing no code with the server.

`violations(history)` lists every broken guarantee; an empty list is a pass.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from .history import OK, REJECTED, History


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396, section 2."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def violations(history: History) -> list[str]:
    found: list[str] = []
    log = history.one("final_log")["revisions"]
    states = _replay(history, log, found)
    by_revision = {r["revision"]: r for r in log}
    submits = history.of("submit")
    _acknowledged_writes_are_durable(submits, by_revision, found)
    _every_revision_was_requested_once(submits, log, found)
    _reads_are_linearizable(history, submits, states, by_revision, found)
    _policies_keep_their_promises(submits, log, states[-1] if states else None, found)
    _extremes_merge_only_concurrent_writes(submits, log, states, found)
    _watches_are_ordered_unique_reliable(history, by_revision, found)
    _observations_are_delivered(history, found)
    return found


def _replay(history: History, log: list[dict[str, Any]], found: list[str]) -> list[dict[str, Any]]:
    """The state at every revision, from the initial state and the log's applied patches; checks that the
    log is contiguous and that the server's final state is the replay's."""
    created = history.one("created")
    states = [merge_patch({}, created["initial"])]
    for expected, revision in enumerate(log, start=1):
        if revision["revision"] != expected:
            found.append(f"log: revision {revision['revision']} where {expected} was expected (a gap or a repeat)")
            return states
        states.append(merge_patch(states[-1], revision["applied_patch"]))
    final = history.one("final_state")
    if final["revision"] != len(log):
        found.append(f"final state: revision {final['revision']}, but the log ends at {len(log)}")
    elif canonical(final["state"]) != canonical(states[-1]):
        found.append("final state: differs from the replay of the log")
    return states


def _acknowledged_writes_are_durable(
    submits: list[dict[str, Any]], by_revision: dict[int, dict[str, Any]], found: list[str]
) -> None:
    for submit in submits:
        if submit["outcome"] != OK:
            continue
        logged = by_revision.get(submit["revision"])
        if logged is None:
            found.append(f"lost write: {submit['id']} was acknowledged as revision {submit['revision']}")
        elif (logged["client_patch_id"], logged["state_hash"]) != (submit["id"], submit["hash"]):
            found.append(
                f"lost write: revision {submit['revision']} was acknowledged to {submit['id']} with hash "
                f"{submit['hash'][:12]}, the log holds {logged['client_patch_id']} with {logged['state_hash'][:12]}"
            )


def _every_revision_was_requested_once(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], found: list[str]
) -> None:
    requests = {s["id"]: s for s in submits}
    seen = Counter(r["client_patch_id"] for r in log)
    for revision in log:
        request = requests.get(revision["client_patch_id"])
        if request is None:
            found.append(f"phantom revision {revision['revision']}: no request has id {revision['client_patch_id']}")
        elif request["outcome"] == REJECTED:
            found.append(
                f"revision {revision['revision']} applies {request['id']}, which was refused {request['status']}"
            )
        elif request["agent"] != revision["agent_id"]:
            found.append(f"revision {revision['revision']}: agent {revision['agent_id']}, sent by {request['agent']}")
    found.extend(f"request {key} committed {n} revisions" for key, n in seen.items() if n > 1)


def _reads_are_linearizable(
    history: History,
    submits: list[dict[str, Any]],
    states: list[dict[str, Any]],
    by_revision: dict[int, dict[str, Any]],
    found: list[str],
) -> None:
    """A read returns a state the log replays to, no older than any write acknowledged before the read
    began, and no newer than what had been requested by the time it ended."""
    acks = sorted((s["end"], s["revision"]) for s in submits if s["outcome"] == OK)
    request_of = {s["id"]: s for s in submits}
    genesis = history.one("created")["hash"]
    for read in history.of("read"):
        if read["outcome"] != OK:
            continue
        revision = read["revision"]
        if revision >= len(states):
            found.append(f"read at {read['start']:.3f}s saw revision {revision}, beyond the log's {len(states) - 1}")
            continue
        if canonical(read["state"]) != canonical(states[revision]):
            found.append(f"read of revision {revision} saw a state that the log does not replay to")
        expected_hash = genesis if revision == 0 else by_revision[revision]["state_hash"]
        if read["hash"] != expected_hash:
            found.append(f"read of revision {revision}: hash {read['hash'][:12]}, the log's {expected_hash[:12]}")
        newest_acked = max((r for end, r in acks if end < read["start"]), default=0)
        if revision < newest_acked:
            found.append(
                f"stale read: revision {revision} at {read['start']:.3f}s, after revision {newest_acked} was "
                "acknowledged"
            )
        if revision > 0:
            writer = request_of.get(by_revision[revision]["client_patch_id"])
            if writer is not None and writer["start"] > read["end"]:
                found.append(f"read of revision {revision} ended before the write it shows was sent")


def _policies_keep_their_promises(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], final: dict[str, Any] | None, found: list[str]
) -> None:
    """counter: every committed delta counted once; set, append and text: every committed element present
    once; max and min: the extreme of every committed value; lww: every key holds the write with the
    greatest stamp (base revision, agent)."""
    if final is None:
        return
    requests = {s["id"]: s for s in submits}
    committed = [(r, requests[r["client_patch_id"]]) for r in log if r["client_patch_id"] in requests]
    by_policy: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for revision, request in committed:
        by_policy[request["policy"]].append((revision, request))
    deltas = sum(request["delta"] for _, request in by_policy["counter"])
    if final["count"] != deltas:
        found.append(f"counter: the state holds {final['count']}, the committed deltas sum to {deltas}")
    tags = {request["element"] for _, request in by_policy["set"]}
    if set(final["tags"]) != tags or len(final["tags"]) != len(tags):
        found.append(f"set: {len(final['tags'])} elements in the state, {len(tags)} committed")
    events = Counter(request["element"] for _, request in by_policy["append"])
    if Counter(final["events"]) != events:
        found.append(f"append: {len(final['events'])} elements in the state, {sum(events.values())} committed")
    lines = Counter(final["note"].splitlines())
    written = Counter(request["element"] for _, request in by_policy["text"])
    if lines != written:
        found.append(f"text: {sum(lines.values())} lines in the state, {sum(written.values())} committed")
    writes: dict[str, list[tuple[tuple[int, str], str]]] = defaultdict(list)
    for revision, request in by_policy["lww"]:
        writes[request["key"]].append(((revision["base_revision"], revision["agent_id"]), request["element"]))
    for key, stamped in writes.items():
        stamped.sort()
        if len(stamped) > 1 and stamped[-1][0] == stamped[-2][0]:
            continue  # two writes with one stamp: either may hold
        if final["inventory"].get(key) != stamped[-1][1]:
            found.append(
                f"lww: {key} holds {final['inventory'].get(key)!r}, the greatest stamp wrote {stamped[-1][1]!r}"
            )


def _extremes_merge_only_concurrent_writes(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], states: list[dict[str, Any]], found: list[str]
) -> None:
    """max and min, revision by revision: a write that nothing else wrote since its base applies as it is
    (the agent saw the value it replaces); one that raced another takes the extreme of both."""
    requests = {s["id"]: s for s in submits}
    last_write: dict[str, int] = {}
    for revision in log:
        request = requests.get(revision["client_patch_id"])
        number = revision["revision"]
        if request is None or number >= len(states):
            return
        key = {"max": "high", "min": "low"}.get(request["policy"])
        if key is not None:
            raced = last_write.get(key, 0) > request["base"]
            extreme = max if request["policy"] == "max" else min
            expected = extreme(states[number - 1][key], request["value"]) if raced else request["value"]
            if states[number][key] != expected:
                found.append(f"{request['policy']}: revision {number} made {key} {states[number][key]}, not {expected}")
        for written in request["patch"]:
            last_write[written] = number


def _watches_are_ordered_unique_reliable(
    history: History, by_revision: dict[int, dict[str, Any]], found: list[str]
) -> None:
    head = len(by_revision)
    for watch in history.of("watch"):
        expected = watch["from"] + 1
        for revision, state_hash in watch["events"]:
            if revision != expected:
                found.append(f"watch {watch['client']}: revision {revision} where {expected} was due")
                break
            if by_revision.get(revision, {}).get("state_hash") != state_hash:
                found.append(f"watch {watch['client']}: revision {revision} with a hash the log does not hold")
                break
            expected += 1
        else:
            if expected - 1 != head:
                found.append(f"watch {watch['client']}: ended at revision {expected - 1}, the log at {head}")


def _observations_are_delivered(history: History, found: list[str]) -> None:
    """Each stream gets, in order and once, observations that were published to it (matched by payload id,
    since a publish without an answer may still have been stored), and every acknowledged one."""
    publishes = {p["id"]: p for p in history.of("publish")}
    for stream in history.of("stream"):
        agent, received = stream["client"], stream["received"]
        sequences = [sequence for sequence, _ in received]
        if sequences != sorted(set(sequences)):
            found.append(f"observations to {agent}: out of order or repeated")
        for sequence, payload_id in received:
            publish = publishes.get(payload_id)
            if (
                publish is None
                or publish["outcome"] == REJECTED
                or publish["to"] not in (agent, "*")
                or (publish["outcome"] == OK and publish["sequence"] != sequence)
            ):
                found.append(f"observations to {agent}: sequence {sequence} is not one published to it")
        due = {p["sequence"] for p in publishes.values() if p["outcome"] == OK and p["to"] in (agent, "*")}
        missing = due - set(sequences)
        if missing:
            found.append(
                f"observations to {agent}: {len(missing)} acknowledged ones never arrived, e.g. {min(missing)}"
            )
