"""The errors the scripted test policy makes on purpose (policy.py): the paper's small-model errors, which
validation and the rollback catch; schema-valid wrong patches, which only state drift shows; and replies of
a set length, for measuring how the token ratios depend on it. Test policy only: never model behaviour."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from ..envs.warehouse import SHELVES, shelf_number
from ..protocol.reply import format_reply

FAULT_MIX = (("overwrite", 0.68), ("type", 0.20), ("malformed", 0.12))
"""The paper's small-model errors (`faulty-R`): 68% patches that overwrite or delete existing keys, 20% type
errors, 12% malformed JSON."""


def inject_fault(rng: random.Random, reasoning: str, patch: dict[str, Any], action: str) -> str:
    """A reply with one of the paper's small-model errors, drawn by FAULT_MIX."""
    kind = _kind(rng)
    if kind == "malformed":
        return f'{reasoning}\n\n```json\n{{"state_patch": {json.dumps(patch)}, "action": "{action}"\n```'
    return format_reply(reasoning, _damaged(rng, kind, patch, action), action)


def transcript_fault(rng: random.Random, reasoning: str, patch: dict[str, Any], action: str, *, stateful: bool) -> str:
    """The same errors, drawn by FAULT_MIX, in a transcript runtime's own format (`Action: <cmd>`, with
    `StateUpdate:` for the stateful one). Where a runtime keeps a state, an overwrite or a type error is in its
    update, which the server refuses; where it keeps none, the wrong value is in the action, which the world
    refuses (an overwrite names the wrong shelf, a type error a number for a shelf); a malformed reply has no
    readable answer."""
    kind = _kind(rng)
    if kind == "malformed":
        broken = f'\nStateUpdate: {{"inventory": {json.dumps(patch.get("inventory") or {})}' if stateful else ""
        return f"{reasoning}{broken}\nI will go with {action}."
    if stateful:
        return f"{reasoning}\nStateUpdate: {json.dumps(_damaged(rng, kind, patch, action))}\nAction: {action}"
    words = action.split()
    if len(words) < 3:  # Wait, Finish: no value to get wrong
        return f"{reasoning}\nAction: {action}"
    wrong = f"shelf_{rng.randrange(SHELVES)}" if kind == "overwrite" else str(rng.randint(1, 99))
    return f"{reasoning}\nAction: {' '.join([*words[:-1], wrong])}"


def _kind(rng: random.Random) -> str:
    return rng.choices([k for k, _ in FAULT_MIX], weights=[w for _, w in FAULT_MIX])[0]


def _damaged(rng: random.Random, kind: str, patch: dict[str, Any], action: str) -> dict[str, Any]:
    """The patch of an overwrite (the state's top-level key the step writes, deleted or overwritten) or of a
    type error (a number where the step writes an item or a shelf, text where it writes a number)."""
    key = next(iter(patch), "inventory")
    if kind == "overwrite":
        damaged: dict[str, Any] = rng.choice([{key: None}, {key: f"updated after {action}"}])
        return damaged
    written = patch.get(key)
    values: dict[str, Any] = written if isinstance(written, dict) else {}
    inner = next(iter(values), "shelf_0")
    wrong = f"{values[inner]} units" if isinstance(values.get(inner), int) else rng.randint(1, 99)
    return {key: {inner: wrong}}


def semantic_fault(rng: random.Random, patch: dict[str, Any], action: str) -> dict[str, Any]:
    """A schema-valid but wrong patch (`semantic-R`): half the time the item recorded one shelf off, half the
    time the step's change dropped. No validation catches it: it shows as state drift."""
    key = "inventory" if "inventory" in patch else "locations"
    values = patch.get(key)
    if not isinstance(values, dict) or not values:
        return patch
    if rng.random() < 0.5 and action.startswith("Store"):
        return shelf_off(patch, action)
    dropped = rng.choice(sorted(values))
    kept = {k: v for k, v in values.items() if k != dropped}
    return {**patch, key: kept} if kept else {k: v for k, v in patch.items() if k != key}


DELIBERATION = (
    "Before I act, I go over the observation once more and ask whether anything in it changes the plan.",
    "I check that the action names exactly the item and the shelves involved, in the order the format wants.",
    "I make sure that what I record stays consistent with what the world reported after the last action.",
    "I consider the alternatives and keep the simplest action that does what the observation asks for.",
    "Nothing else in the observation calls for a different step, so I keep to the procedure of the skill.",
)
"""Sentences of step-by-step deliberation a longer reply adds, in turn (`reply_words`)."""


def lengthened(reasoning: str, words: int) -> str:
    """The reasoning cut, or extended with DELIBERATION, to exactly `words` words (at least one)."""
    parts = reasoning.split()
    filler = itertools.cycle(" ".join(DELIBERATION).split())
    while len(parts) < words:
        parts.append(next(filler))
    return " ".join(parts[: max(words, 1)])


def shelf_off(patch: dict[str, Any], action: str) -> dict[str, Any]:
    """The patch of `corrupts`: a stored item recorded one shelf past the one the action stores it on (in the
    warehouse's `inventory`, or in the stockroom's `locations`)."""
    words = action.split()
    locations = patch.get("locations")
    if len(words) == 4 and words[0] == "Store" and isinstance(locations, dict) and words[1] in locations:
        return {**patch, "locations": {**locations, words[1]: _next_shelf(words[3])}}
    inventory = patch.get("inventory")
    if len(words) != 3 or words[0] != "Store" or not isinstance(inventory, dict) or words[2] not in inventory:
        return patch
    wrong = _next_shelf(words[2])
    return {**patch, "inventory": {**{k: v for k, v in inventory.items() if k != words[2]}, wrong: words[1]}}


def _next_shelf(shelf: str) -> str:
    return f"shelf_{(shelf_number(shelf) + 1) % SHELVES}"
