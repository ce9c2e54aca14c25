"""What a SKILL.state step must answer: reasoning (discarded) and one fenced JSON block with exactly two keys,
`state_patch` (an object: a JSON merge patch, `null` deletes a key) and `action` (a string).

    I need to ship item_12, which my state puts on shelf_42.
    ```json
    {"state_patch": {"inventory": {"shelf_42": null}}, "action": "Ship item_12 shelf_42"}
    ```

`parse_reply` returns the two values or raises ReplyError with a message meant for the model: the runtime puts
it in the next observation and asks again (the paper's rollback-retry), the state untouched.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCED_JSON = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
KEYS = ("state_patch", "action")

REASONING = "reasoning"
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        REASONING: {"type": "string"},
        "state_patch": {"type": "object"},
        "action": {"type": "string", "minLength": 1},
    },
    "required": [REASONING, *KEYS],
    "additionalProperties": False,
}
"""What `--constrained` asks a model that supports it to answer for SKILL.state: the reply as one JSON object,
its step-by-step reasoning first (discarded like any reasoning), as every runtime's constrained schema has."""


class ReplyError(ValueError):
    """The reply does not follow the format; the message says what to fix."""


@dataclass(frozen=True)
class Reply:
    state_patch: dict[str, Any]
    action: str


def json_block(text: str, keys: str = "`state_patch` and `action`") -> dict[str, Any]:
    """The reply's one JSON block as an object (`keys`: what it should hold, for the message of a refusal);
    a bare object is taken as the block, without its `reasoning` (constrained output)."""
    blocks = _FENCED_JSON.findall(text)
    if not blocks:
        stripped = text.strip()
        if not (stripped.startswith("{") and stripped.endswith("}")):  # a bare object (constrained output)
            raise ReplyError("no JSON block: end your reply with one ```json fenced block")
        blocks = [stripped]
    if len(blocks) > 1:
        raise ReplyError(f"{len(blocks)} JSON blocks: give exactly one, with {keys}")
    try:
        value = json.loads(blocks[0])
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise ReplyError(f"the JSON block does not parse: {error.msg} at {where}") from None
    if not isinstance(value, dict):
        raise ReplyError(f"the JSON block is a {type(value).__name__}, not an object with {keys}")
    if blocks == [text.strip()] and isinstance(value.get(REASONING), str):
        value = {k: v for k, v in value.items() if k != REASONING}  # constrained output: its reasoning first
    return value


def parse_reply(text: str) -> Reply:
    """The state patch and action of a reply; its reasoning is dropped here."""
    value = json_block(text)
    missing = [key for key in KEYS if key not in value]
    extra = sorted(set(value) - set(KEYS))
    if missing or extra:
        problems = [f"missing {', '.join(f'`{k}`' for k in missing)}"] if missing else []
        problems += [f"unexpected {', '.join(f'`{k}`' for k in extra)}"] if extra else []
        raise ReplyError(f"the JSON block must have exactly `state_patch` and `action`: {'; '.join(problems)}")
    if not isinstance(value["state_patch"], dict):
        raise ReplyError(f"`state_patch` must be an object, not {json_type(value['state_patch'])}")
    if not isinstance(value["action"], str) or not value["action"].strip():
        raise ReplyError(f"`action` must be a non-empty string, not {json_type(value['action'])}")
    return Reply(value["state_patch"], value["action"].strip())


EXPAND = "expand"


def parse_expand(text: str) -> str | None:
    """The macro id of a request to expand one (`--rezip`): a reply whose only JSON block (or bare object) is
    exactly `{"expand": "<macro id>"}`; None for any other reply, which `parse_reply` then judges."""
    blocks = _FENCED_JSON.findall(text) or [text.strip()]
    if len(blocks) != 1:
        return None
    try:
        value = json.loads(blocks[0])
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and isinstance(value.get(REASONING), str):
        value = {k: v for k, v in value.items() if k != REASONING}  # constrained output: its reasoning first
    if not isinstance(value, dict) or set(value) != {EXPAND} or not isinstance(value[EXPAND], str):
        return None
    return value[EXPAND].strip() or None


def format_expand(reasoning: str, macro_id: str) -> str:
    """A request to expand a macro in the format `parse_expand` reads (what the scripted test policy writes)."""
    return f"{reasoning.strip()}\n\n```json\n{json.dumps({EXPAND: macro_id})}\n```"


def format_reply(reasoning: str, state_patch: dict[str, Any], action: str) -> str:
    """A reply in the format `parse_reply` reads (what the scripted test policy writes)."""
    block = json.dumps({"state_patch": state_patch, "action": action}, separators=(", ", ": "))
    return f"{reasoning.strip()}\n\n```json\n{block}\n```"


def json_type(value: Any) -> str:
    """A JSON value's type as a message to the model names it ("an array", "null")."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    return {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}[type(value)]
