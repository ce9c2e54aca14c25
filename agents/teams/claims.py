"""Claiming work through the shared state: who handles an event is decided in Σ, before any model call.

An event addressed to a skill reaches every agent of that skill. Each reads Σ and, if the event is free,
writes its claim `claims/<event id>` = {"agent": <its id>, "until": <tick>} against the revision it read.
The path is under the `reject` policy, so of two agents claiming on the same revision exactly one commits:
the other's stale write is refused (ABORTED), and it moves on having spent no tokens. The claim names its
agent because an equal value is never a conflict (docs/merge.md): two agents writing the same claim would
both win.

A claim is a lease: once Σ's clock (written by the world every tick) passes `until`, another agent may
take the event over by writing its own claim. The action that handles the event is submitted in the same
patch as `{"agent": <its id>, "done": true}` on the claim, against the revision the agent read before its
model call; if the claim was taken over since, it names another agent there, that patch is refused as a
conflict, and the action never reaches the world twice. A done claim never expires. An agent told that its
action failed reopens its own claim (a new lease) and tries again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLAIMS = "claims"
CLOCK = "clock"
RUNTIME_KEYS = frozenset({CLAIMS, CLOCK})
"""Top-level keys of Σ the runtime keeps for itself: never shown to a model."""

SCHEMA: dict[str, Any] = {
    CLAIMS: {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "properties": {"agent": {"type": "string"}, "until": {"type": "integer"}, "done": {"type": "boolean"}},
            "required": ["agent", "until"],
            "additionalProperties": False,
        },
    },
    CLOCK: {"type": "integer", "minimum": 0, "x-merge": "max"},
}
"""The schema properties a concurrent execution adds for claims and the world's clock."""


class Standing(enum.Enum):
    """Where an event stands for one agent."""

    FREE = "free"
    """No one claimed it: claim it."""
    MINE = "mine"
    """This agent holds it (a redelivery, or its own earlier claim): work on it."""
    HELD = "held"
    """Another agent holds a live lease: leave it, and look again once the lease may have run out."""
    EXPIRED = "expired"
    """Another agent's lease ran out before it acted: take it over."""
    DONE = "done"
    """Some agent acted on it: nothing to do."""


@dataclass(frozen=True)
class Claim:
    agent: str
    until: int
    done: bool = False


def claim_of(state: Mapping[str, Any], event_id: str) -> Claim | None:
    entry = (state.get(CLAIMS) or {}).get(event_id)
    if not isinstance(entry, Mapping):
        return None
    return Claim(str(entry.get("agent", "")), int(entry.get("until", 0)), bool(entry.get("done", False)))


def clock_of(state: Mapping[str, Any]) -> int:
    return int(state.get(CLOCK) or 0)


def standing(state: Mapping[str, Any], event_id: str, agent: str) -> Standing:
    claim = claim_of(state, event_id)
    if claim is None:
        return Standing.FREE
    if claim.done:
        return Standing.DONE
    if claim.agent == agent:
        return Standing.MINE
    return Standing.EXPIRED if claim.until < clock_of(state) else Standing.HELD


def claim_patch(event_id: str, agent: str, until: int) -> dict[str, Any]:
    """Claim (or take over, or reopen) an event, leased until tick `until`."""
    return {CLAIMS: {event_id: {"agent": agent, "until": until, "done": None}}}


def renew_patch(event_id: str, agent: str, until: int) -> dict[str, Any]:
    """Extend this agent's lease while its model is asked. It names the agent, so that it conflicts with a
    takeover since the revision read; it leaves `done` alone, so the patch carrying the action (based on an
    earlier revision) does not conflict with it."""
    return {CLAIMS: {event_id: {"agent": agent, "until": until}}}


def lapsed(state: Mapping[str, Any], event_id: str) -> bool:
    """Whether the event's claim is open and its lease ran out (or was released)."""
    claim = claim_of(state, event_id)
    return claim is not None and not claim.done and claim.until < clock_of(state)


def settled(state: Mapping[str, Any], event_id: str) -> bool:
    """Whether the event is done for good: its claim done and its lease run out. Until then the action may
    still fail (the world reports to the agent that acted, which then reopens the claim), so an agent that
    saw it done keeps looking."""
    claim = claim_of(state, event_id)
    return claim is not None and claim.done and claim.until < clock_of(state)


def done_patch(event_id: str, agent: str) -> dict[str, Any]:
    """Merged into the patch that carries the event's action. It writes the claim's agent again, so that it
    conflicts with a takeover since the revision the agent read: after one, the claim names another agent,
    and the late holder's patch (with its action) is refused. Writing `done` alone would not do: a taker's
    own `done: true` is an equal value, never a conflict."""
    return {CLAIMS: {event_id: {"agent": agent, "done": True}}}


def release_patch(event_id: str) -> dict[str, Any]:
    """Let the lease run out now, so that another agent may take the event over at once."""
    return {CLAIMS: {event_id: {"until": -1}}}


def with_claim(patch: Mapping[str, Any], claim: Mapping[str, Any]) -> dict[str, Any]:
    """A model's patch with a claim patch: what the model wrote under the runtime's keys is dropped."""
    return {**visible(patch), CLAIMS: claim[CLAIMS]}


def visible(state: Mapping[str, Any]) -> dict[str, Any]:
    """Σ without the runtime's own keys: what a model may see and write."""
    return {key: value for key, value in state.items() if key not in RUNTIME_KEYS}
