"""How a transcript runtime's answer is read (runtime/contexts.py): its `Action:` line, its `StateUpdate:`, or, with
`--constrained`, one JSON object holding them. Each reads what models write, and raises ReplyError (counted
`malformed`, and asked again) for what it cannot read: nothing is dropped in silence."""

from __future__ import annotations

import json
import re
from typing import Any

from .reply import ReplyError, json_type

_ACTION_LINE = re.compile(r"^[ \t>*#-]*Action\b[*_]*[ \t]*:[*_]*(.*)$", re.MULTILINE | re.IGNORECASE)
"""`Action: <cmd>` at the start of a line, in markdown emphasis or a heading or not; the command may follow on
the next line (fenced or not)."""
_STATE_UPDATE = re.compile(r"\bState[ _]?Update\b[*_`\"]*(?:[ \t]*\([^)\n]{0,20}\))?[*_`\"]*[ \t]*:", re.IGNORECASE)
_UPDATE_OPENING = re.compile(r"[\s*]*(?:```[\w+-]*|`)?\s*")
"""What may stand between `StateUpdate:` and its object: emphasis, a fence opener (```json) or a backtick."""
_NO_UPDATE = re.compile(r"(?:none|null|nothing|n/a|no changes?|no update)\b", re.IGNORECASE)
_DECODER = json.JSONDecoder()


def read_state_update(text: str) -> dict[str, Any]:
    """Every `StateUpdate:` of the answer as one patch ({}: none, the model chose not to update)."""
    patch: dict[str, Any] = {}
    read = 0  # where the last update read ends: a marker inside an update is part of it
    for marker in _STATE_UPDATE.finditer(text):
        if marker.start() >= read:
            update, read = _state_update(text, marker.end())
            patch = _compose(patch, update)
    return patch


def read_constrained(text: str, *keys: str) -> dict[str, Any] | None:
    """A constrained answer (`--constrained`): the whole reply one JSON object holding `keys`; else None."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not all(key in value for key in keys):
        return None
    if not isinstance(value.get("action"), str) or not value["action"].strip():
        raise ReplyError("`action` must be a non-empty string")
    return value


def read_action(text: str) -> str:
    """The command of the answer's last `Action:` line, or of the line below it when the line holds none
    (`Action:` then a fenced block), without backticks, emphasis, quotes or `<...>` around it."""
    commands = []
    for line in _ACTION_LINE.finditer(text):
        command = _command(line.group(1))
        if not command or command.startswith("```"):
            below = (s.strip() for s in text[line.end() :].splitlines())
            command = _command(next((s for s in below if s and not s.startswith("```")), ""))
        if command:
            commands.append(command)
    if not commands:
        raise ReplyError("no action: end your reply with a line 'Action: <cmd>'")
    return commands[-1]


def _command(raw: str) -> str:
    command = raw.strip().strip("*`").strip()
    if len(command) > 1 and command[0] + command[-1] in ('""', "''", "<>"):
        command = command[1:-1].strip()
    return command


def _state_update(text: str, marker_end: int) -> tuple[dict[str, Any], int]:
    """The patch a `StateUpdate:` ending at `marker_end` gives ({} when it says there is none), and where what
    was read of it ends."""
    opening = _UPDATE_OPENING.match(text, marker_end)
    start = marker_end if opening is None else opening.end()
    if nothing := _NO_UPDATE.match(text, start):
        return {}, nothing.end()
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as error:
        if not text.startswith("{", start):
            raise ReplyError(
                "the StateUpdate is not followed by a JSON object: write 'StateUpdate: {...}', or leave it out "
                "to change nothing"
            ) from None
        line = text.count("\n", start, error.pos) + 1
        raise ReplyError(f"the StateUpdate does not parse as JSON: {error.msg} at line {line} of the update") from None
    if value is None:
        return {}, end
    if not isinstance(value, dict):
        raise ReplyError(f"the StateUpdate must be a JSON object, not {json_type(value)}")
    return value, end


def _compose(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """One merge patch doing what `first` then `then` do."""
    patch = dict(first)
    for key, value in then.items():
        before = patch.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = _compose(before, value)
        elif isinstance(value, dict) and key in patch:
            raise ReplyError(f"two StateUpdates disagree on `{key}` (a value, then an object): give one update")
        else:
            patch[key] = value
    return patch
