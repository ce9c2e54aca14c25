"""The tools a working agent acts with (`skillstate work`), run in its working directory and nowhere else.

`bash` `{"command", "timeout_s"}`, `read_file` `{"path", "offset", "limit"}`, `write_file` `{"path",
"content"}` and `finish` `{"summary"}`. A file path is resolved inside the directory: `..` that climbs out of
it, an absolute path elsewhere, or a symbolic link that leads out is refused. A command runs with the
directory as its working directory and without the environment's keys and tokens (`_command_environment`),
but it is not a sandbox: it can reach what the user can (run `work` in a container for a task you do not
trust). Every command has a time limit, and what it prints a size limit: the output is read as it comes,
the rest thrown away past the limit, and the cut said in the record (`truncated`), never silent. A command
that leaves a child holding its output open (`server &`) is taken as done once it exits and its output
goes quiet for OUTPUT_GRACE; the child is killed with its process group. Each action gives an
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
OUTPUT_GRACE = 0.5
"""Seconds a command's output may stay open after it exited (a child it left running holds it)."""
EXIT_POLL = 0.02
"""Seconds between looks at whether a command exited."""
SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
"""Environment variables whose name holds one of these are not passed to commands."""


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
        except ToolError as error:
            return ActionRecord(action, "failed", str(error))
        except (OSError, ValueError, RuntimeError) as error:  # a missing file, a NUL byte, a lone surrogate, a loop
            return ActionRecord(action, "failed", f"{type(error).__name__}: {error}")

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
        limit = min(float(limit), MAX_COMMAND_TIMEOUT)
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=self.root, env=_command_environment(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        assert process.stdout is not None
        output = _Output(self.result_limit)
        reading = asyncio.ensure_future(output.read(process.stdout))
        timed_out = not await _exited(process, limit)  # not process.wait(): it waits for the output to close
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reading), OUTPUT_GRACE)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the command, or what it left running
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        await _exited(process, OUTPUT_GRACE)
        process._transport.close()  # type: ignore[attr-defined]  # a child outside the group may hold the pipe
        text, truncated = output.text()
        if timed_out:
            return ActionRecord(action, "timeout", f"Stopped after {limit:g} s. Its output so far:\n{text}",
                                truncated, process.returncode)  # fmt: skip
        status = "completed" if process.returncode == 0 else "failed"
        return ActionRecord(action, status, text, truncated, process.returncode)

    def _cut(self, action: Action, status: str, result: str) -> ActionRecord:
        if len(result) <= self.result_limit:
            return ActionRecord(action, status, result)
        return ActionRecord(action, status, result[: self.result_limit], truncated=self.result_limit)


async def _exited(process: asyncio.subprocess.Process, within: float) -> bool:
    """Whether the process exited within `within` seconds (its exit status, not its output's end)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while process.returncode is None and loop.time() < deadline:
        await asyncio.sleep(EXIT_POLL)
    return process.returncode is not None


class _Output:
    """A command's output as it comes, kept up to a limit (the rest read and thrown away)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.seen = 0

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.seen += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> tuple[str, int | None]:
        """The output kept, and how much was kept when it was cut (None: whole)."""
        return self.kept.decode("utf-8", errors="replace"), (len(self.kept) if self.seen > len(self.kept) else None)


def _command_environment() -> dict[str, str]:
    """The environment without its keys and tokens: a command's output goes to the model and to disk."""
    return {name: value for name, value in os.environ.items() if not any(s in name.upper() for s in SECRET_NAMES)}


def _count(arguments: dict[str, Any], name: str, default: int) -> int:
    value = arguments.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolError(f"{name}: a whole number, 0 or more")
    return value
