"""The reference model a robustness history is checked against: one execution is a document, a sequence of
revisions each applying an RFC 7396 merge patch, and the merge policies' promises. Written from the
specification (docs/guarantees.md, docs/merge.md), sharing no code with the server.

`violations(history)` lists every broken guarantee; an empty list is a pass. Each place below that reports
a violation is one check; docs/guarantees.md lists them all, each with the violation planted in a real
history that proves it catches what it claims (tests/robustness/test_robustness.py).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import zip_longest
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
    replayed = log[: len(states) - 1]  # the whole log, unless it has a gap
    _policies_keep_their_promises(submits, replayed, states[-1], found)
    _lww_keeps_the_greatest_stamp(submits, replayed, states, found)
    _extremes_merge_only_concurrent_writes(submits, replayed, states, found)
    _conflicts_only_where_the_policy_allows(submits, log, states, found)
    _watches_are_ordered_unique_reliable(history, by_revision, found)
    _observations_are_delivered(history, found)
    _sessions_answer_in_submission_order(history, found)
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
            found.append(
                f"lost write: {submit['id']} was acknowledged as revision {submit['revision']}, which the log lacks"
            )
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
        elif (request["agent"], request["base"]) != (revision["agent_id"], revision["base_revision"]):
            found.append(
                f"revision {revision['revision']}: agent {revision['agent_id']} from base {revision['base_revision']}, "
                f"sent by {request['agent']} from base {request['base']}"
            )
        elif request["policy"] == "invalid":
            found.append(f"revision {revision['revision']} applies {request['id']}, which the schema refuses")
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
    submits: list[dict[str, Any]], log: list[dict[str, Any]], final: dict[str, Any], found: list[str]
) -> None:
    """In the final state. counter: every committed delta counted once; set, append and text: every
    committed element present once, and nothing else; append: in commit order (each commit appends to
    head)."""
    requests = {s["id"]: s for s in submits}
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for revision in log:
        request = requests.get(revision["client_patch_id"])
        if request is not None:
            by_policy[request["policy"]].append(request)
    deltas = sum(request["delta"] for request in by_policy["counter"])
    if final["count"] != deltas:
        found.append(f"counter: the state holds {final['count']}, the committed deltas sum to {deltas}")
    held = {"set": final["tags"], "append": final["events"], "text": final["note"].splitlines()}
    for policy, elements in held.items():
        written = [request["element"] for request in by_policy[policy]]
        due = Counter(set(written) if policy == "set" else written)
        missing, extra = due - Counter(elements), Counter(elements) - due
        if missing or extra:
            found.append(
                f"{policy}: the state lacks {missing.total()} committed elements{_for_example(missing)} and holds "
                f"{extra.total()} never committed or held twice{_for_example(extra)}"
            )
        elif policy == "append" and elements != written:
            at = next(i for i, (held_here, due) in enumerate(zip(elements, written, strict=True)) if held_here != due)
            found.append(f"append: every committed element is there once, but not in commit order (from index {at})")


def _for_example(elements: Counter[str]) -> str:
    return f" (e.g. {min(elements)!r})" if elements else ""


def _lww_keeps_the_greatest_stamp(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], states: list[dict[str, Any]], found: list[str]
) -> None:
    """lww, revision by revision: every key holds the committed write with the greatest stamp (base revision,
    agent), a tie (one agent, one base) going to the later commit, and no key nobody wrote. Reports the
    first revision that breaks it; the ones after it would repeat the report."""
    requests = {s["id"]: s for s in submits}
    greatest: dict[str, tuple[tuple[int, str, int], str]] = {}
    for revision in log:
        number, request = revision["revision"], requests.get(revision["client_patch_id"])
        if request is not None and request["policy"] == "lww":
            stamp = (revision["base_revision"], revision["agent_id"], number)
            if request["key"] not in greatest or greatest[request["key"]][0] < stamp:
                greatest[request["key"]] = (stamp, request["element"])
        held = states[number]["inventory"]
        expected = {key: element for key, (_, element) in greatest.items()}
        wrong = sorted(key for key in held.keys() | expected.keys() if held.get(key) != expected.get(key))
        if wrong:
            key = wrong[0]
            found.append(
                f"lww: revision {number} left {key} {held.get(key)!r}, the greatest stamp wrote {expected.get(key)!r}"
            )
            return


def _written(revision: dict[str, Any], request: dict[str, Any] | None) -> dict[str, Any]:
    """What a revision's request wrote (a write of the value already there is a write too); for a revision
    no request explains, what its applied patch changed."""
    return request["patch"] if request is not None else revision["applied_patch"]


def _extremes_merge_only_concurrent_writes(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], states: list[dict[str, Any]], found: list[str]
) -> None:
    """max and min, revision by revision: a write that nothing else wrote since its base applies as it is
    (the agent saw the value it replaces); one that raced another takes the extreme of both."""
    requests = {s["id"]: s for s in submits}
    last_write: dict[str, int] = {}
    for revision in log:
        number, request = revision["revision"], requests.get(revision["client_patch_id"])
        key = {"max": "high", "min": "low"}.get(request["policy"]) if request is not None else None
        if request is not None and key is not None:
            raced = last_write.get(key, 0) > request["base"]
            extreme = max if request["policy"] == "max" else min
            expected = extreme(states[number - 1][key], request["value"]) if raced else request["value"]
            if states[number][key] != expected:
                found.append(f"{request['policy']}: revision {number} made {key} {states[number][key]}, not {expected}")
        for written in _written(revision, request):
            last_write[written] = number


NEVER_CONFLICT = ("counter", "set", "append", "lww", "max", "min", "text", "invalid")
"""The writes that can never be refused `ABORTED`, as the agents make them: counter deltas are numbers, set,
append and text merge any concurrent change, lww, max and min never see a deletion, every append extends the
log it read (docs/merge.md lists what conflicts: none of it is ever sent); and a patch whose value is of the
wrong type for its path (`invalid`, a string for the counter) is `INVALID_ARGUMENT` whatever its base."""


def _conflicts_only_where_the_policy_allows(
    submits: list[dict[str, Any]], log: list[dict[str, Any]], states: list[dict[str, Any]], found: list[str]
) -> None:
    """reject (the `doc` members): a write that another revision wrote over since its base is refused
    `ABORTED`, unless it writes the value head already holds; a refusal had such a write to lose to,
    committed by a request sent before the refusal came back. The other policies are never refused."""
    requests = {s["id"]: s for s in submits}
    writers: dict[str, list[tuple[int, float]]] = defaultdict(list)
    """doc member -> (revision, when its request was sent) of every revision that wrote it"""
    for revision in log:
        number, request = revision["revision"], requests.get(revision["client_patch_id"])
        written = _written(revision, request).get("doc") or {}
        if request is not None and request["policy"] == "reject" and number < len(states):
            ((key, value),) = written.items()
            since = [m for m, _ in writers[key] if m > request["base"]]
            if since and states[number - 1]["doc"].get(key) != value:
                found.append(
                    f"reject: revision {number} merged {request['id']}, written from base {request['base']}, over "
                    f"revision {since[-1]}'s write of doc.{key}"
                )
        for key in written:
            writers[key].append((number, request["start"] if request is not None else float("-inf")))
    for submit in submits:
        if submit["outcome"] != REJECTED or submit["status"] != "ABORTED":
            continue
        if submit["policy"] in NEVER_CONFLICT:
            found.append(f"{submit['policy']}: {submit['id']} was refused ABORTED, a write that never conflicts")
        elif submit["policy"] == "reject":
            ((key, _),) = submit["patch"]["doc"].items()
            if not any(m > submit["base"] and sent < submit["end"] for m, sent in writers[key]):
                found.append(
                    f"reject: {submit['id']} was refused ABORTED, though nothing wrote doc.{key} since its base "
                    f"{submit['base']}"
                )


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


def _sessions_answer_in_submission_order(history: History, found: list[str]) -> None:
    """Each session stream answers its submits in the order they were sent on it, each once (a stream that
    ended early answers those sent first); one that the client half-closed and that ended OK answers every
    one before it ends. What the answers said is held to the submit checks above, as a unary answer is."""
    for stream in history.of("session"):
        sent, answered = stream["sent"], stream["answered"]
        where = f"session {stream['client']} stream {stream['stream']}"
        due = sent[: len(answered)]
        if answered != due:
            at = next(i for i, (got, wanted) in enumerate(zip_longest(answered, due)) if got != wanted)
            wanted = due[at] if at < len(due) else "none"
            found.append(f"{where}: answer {at + 1} was to {answered[at]}, where the answer to {wanted} was due")
        elif stream.get("ended") == "OK" and len(answered) < len(sent):
            found.append(f"{where}: ended OK after answering {len(answered)} of its {len(sent)} submits")
