"""What a working agent answers at each step (`skillstate work`): reasoning (discarded), then one JSON block

    ```json
    {"state_patch": {...}, "action": {"name": "write_file", "input": {"path": "cli.py", "content": "..."}},
     "comment": "the entry point"}
    ```

With `--batch`, `"actions": [...]` (each `{"name", "input", "comment"}`) instead of `"action"`, run in order.
A reply that breaks the format raises ReplyError with what to fix; the runtime asks again, Σ untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..protocol.reply import ReplyError, json_block, json_type
from .tools import TOOLS, Action

MAX_ACTIONS = 20
"""Actions one batched reply may carry."""


@dataclass(frozen=True)
class WorkReply:
    state_patch: dict[str, Any]
    actions: tuple[Action, ...]


def parse_work_reply(text: str, *, batch: bool = False) -> WorkReply:
    keys = "`state_patch` and `actions`" if batch else "`state_patch`, `action` and `comment`"
    value = json_block(text, keys)
    allowed = {"state_patch", "actions"} if batch else {"state_patch", "action", "comment"}
    if extra := sorted(set(value) - allowed):
        raise ReplyError(f"unexpected {', '.join(f'`{k}`' for k in extra)}: the JSON block holds {keys}")
    patch = value.get("state_patch", {})
    if not isinstance(patch, dict):
        raise ReplyError(f"`state_patch` must be an object, not {json_type(patch)}")
    if batch:
        given = value.get("actions")
        if not isinstance(given, list) or not given:
            raise ReplyError('`actions` must be a non-empty list of {"name", "input", "comment"}')
        if len(given) > MAX_ACTIONS:
            raise ReplyError(f"`actions`: {len(given)} actions, at most {MAX_ACTIONS} a reply")
        actions = tuple(_action(item, f"actions/{i}") for i, item in enumerate(given))
    else:
        if "action" not in value:
            raise ReplyError('missing `action`: {"name": one of ' + ", ".join(TOOLS) + ', "input": {...}}')
        actions = (_action({**_mapping(value["action"], "action"), "comment": value.get("comment", "")}, "action"),)
    return WorkReply(patch, actions)


def _action(value: Any, where: str) -> Action:
    item = _mapping(value, where)
    name, arguments, comment = item.get("name"), item.get("input", {}), item.get("comment", "")
    if name not in TOOLS:
        raise ReplyError(f"`{where}/name`: {json_type(name) if not isinstance(name, str) else repr(name)} is not a "
                         f"tool (one of {', '.join(TOOLS)})")  # fmt: skip
    if not isinstance(arguments, dict):
        raise ReplyError(f"`{where}/input` must be an object, not {json_type(arguments)}")
    if not isinstance(comment, str):
        raise ReplyError(f"`{where}/comment` must be a string, not {json_type(comment)}")
    return Action(name, arguments, comment)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReplyError(f"`{where}` must be an object, not {json_type(value)}")
    return value
