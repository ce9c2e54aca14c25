"""How skillstate's failures reach an MCP client: a tool answers a failed call with an error result
(isError) that the model reads; a resource read or a prompt, which have no such result, answer with a
JSON-RPC error. Both name the gRPC status first (`NOT_FOUND: execution 'x' not found`), as the CLI does."""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from skillstate.clients import SkillstateError

_CALLER_ERRORS = {"NOT_FOUND", "INVALID_ARGUMENT", "OUT_OF_RANGE", "FAILED_PRECONDITION"}
"""Statuses that say the request was wrong rather than the server: INVALID_PARAMS on the JSON-RPC side (a
missing resource is INVALID_PARAMS since SEP-2164)."""


def describe(error: SkillstateError) -> str:
    """`STATUS: message`, with the field violations the message does not already name."""
    extra = [f"{field}: {why}" for field, why in error.field_violations if field not in error.message]
    return "; ".join([str(error), *extra])


def tool_error(error: SkillstateError) -> ToolError:
    """A tool's error result: the SDK sends its text with isError, prefixed with the tool's name."""
    return ToolError(describe(error))


def argument_error(argument: str, problem: str) -> ToolError:
    """A tool argument that cannot be used, named so the model can fix it."""
    return ToolError(f"argument {argument!r}: {problem}")


def protocol_error(error: SkillstateError, **data: str) -> MCPError:
    """A JSON-RPC error for a resource read or a prompt; `data` carries the status name and what was asked."""
    code = INVALID_PARAMS if error.status.name in _CALLER_ERRORS else INTERNAL_ERROR
    return MCPError(code=code, message=describe(error), data={"status": error.status.name, **data})
