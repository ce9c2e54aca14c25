"""The tools a working agent acts with (`skillstate work`), run in its working directory and nowhere else.

`bash` `{"command", "timeout_s"}`, `read_file` `{"path", "offset", "limit"}`, `write_file` `{"path",
"content"}` and `finish` `{"summary"}`. A path is resolved inside the directory: `..` that climbs out of it,
an absolute path elsewhere, or a symbolic link that leads out is refused. Every command has a time limit and
its output a size limit; a cut is said in the record (`truncated`), never silent. Each action gives an
`ActionRecord`, what the agent's next observation shows: the action, its comment, its status (`completed`,
`failed`, `timeout` or `skipped`) and its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS = ("bash", "read_file", "write_file", "finish")
COMMAND_TIMEOUT = 60.0
"""Seconds a `bash` command may run unless its `timeout_s` says less (at most MAX_COMMAND_TIMEOUT)."""
MAX_COMMAND_TIMEOUT = 600.0
RESULT_LIMIT = 2 * 1024 * 1024
"""Characters of a result kept before it is cut (the cut is said in the record)."""
READ_LIMIT = 2000
"""Lines `read_file` returns unless its `limit` says otherwise."""


@dataclass(frozen=True)
class Action:
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    comment: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "input": self.input}


@dataclass(frozen=True)
class ActionRecord:
    action: Action
    status: str
    """`completed`, `failed`, `timeout` or `skipped`."""
    result: str
    truncated: int | None = None
    """The characters kept when the result was cut."""
    exit_code: int | None = None

    def as_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"action": self.action.as_json(), "comment": self.action.comment,
                                  "status": self.status, "result": self.result}  # fmt: skip
        if self.truncated is not None:
            record["truncated"] = self.truncated
        if self.exit_code is not None:
            record["exit_code"] = self.exit_code
        return record


class ToolError(ValueError):
    """An action the tools refuse (an unknown tool, a missing argument, a path outside the directory)."""


class Workdir:
    def __init__(self, root: Path, result_limit: int = RESULT_LIMIT) -> None:
        self.root = root.resolve()
        self.result_limit = result_limit

    def path(self, given: Any) -> Path:
        """`given` resolved inside the directory, or ToolError."""
        if not isinstance(given, str) or not given:
            raise ToolError("path: a non-empty string")
        resolved = (self.root / given).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"path: {given!r} is outside the working directory")
        return resolved

    async def run(self, action: Action) -> ActionRecord:
        """Run one action; a refused or failing one is a `failed` record, never an exception."""
        try:
            if action.name == "bash":
                return await self._bash(action)
            if action.name == "read_file":
                return self._cut(action, "completed", self._read(action.input))
            if action.name == "write_file":
                return self._cut(action, "completed", self._write(action.input))
            if action.name == "finish":
                return ActionRecord(action, "completed", str(action.input.get("summary", "")))
            raise ToolError(f"unknown tool {action.name!r}: use {', '.join(TOOLS)}")
        except (ToolError, OSError, UnicodeDecodeError) as error:
            return ActionRecord(action, "failed", str(error))

    def _read(self, arguments: dict[str, Any]) -> str:
        path = self.path(arguments.get("path"))
        offset, limit = _count(arguments, "offset", 0), _count(arguments, "limit", READ_LIMIT)
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        return "".join(lines[offset : offset + limit])

    def _write(self, arguments: dict[str, Any]) -> str:
        path = self.path(arguments.get("path"))
        content = arguments.get("content")
        if not isinstance(content, str):
            raise ToolError("content: a string")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"Wrote {len(content.encode())} bytes to {path.relative_to(self.root)}."

    async def _bash(self, action: Action) -> ActionRecord:
        command = action.input.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command: a non-empty string")
        limit = action.input.get("timeout_s", COMMAND_TIMEOUT)
        if not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit <= 0:
            raise ToolError("timeout_s: a number of seconds above 0")
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=self.root, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            output, _ = await asyncio.wait_for(process.communicate(), min(float(limit), MAX_COMMAND_TIMEOUT))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the command and whatever it started
            await process.wait()
            return ActionRecord(action, "timeout", f"Stopped after {float(limit):g} s.", exit_code=process.returncode)
        status = "completed" if process.returncode == 0 else "failed"
        text = output.decode("utf-8", errors="replace")
        record = self._cut(action, status, text)
        return ActionRecord(action, record.status, record.result, record.truncated, process.returncode)

    def _cut(self, action: Action, status: str, result: str) -> ActionRecord:
        if len(result) <= self.result_limit:
            return ActionRecord(action, status, result)
        return ActionRecord(action, status, result[: self.result_limit], truncated=self.result_limit)


def _count(arguments: dict[str, Any], name: str, default: int) -> int:
    value = arguments.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolError(f"{name}: a whole number, 0 or more")
    return value
