"""How failures reach the pages: as JSON `{"error": {"status": NAME, "message": TEXT}}` with an HTTP status
that says the same, so a page (or a script) can tell a missing execution from a token without the right.

ConsoleError            any failure the console itself finds
└── BadParameter        a query parameter, header or body field it cannot use: 400, naming it (`parameter`)

The server's failures arrive as the SDK's typed errors and keep their gRPC status name; `HTTP_STATUS` maps
it. Statuses a read cannot get (ABORTED, ALREADY_EXISTS) and DATA_LOSS are the server's fault: 502.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from skillstate.clients import SkillstateError

from .shapes import JSONResponse

HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "OUT_OF_RANGE": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
"""The HTTP status of each gRPC status name a read can end with; any other is 502 (bad gateway)."""


class ConsoleError(Exception):
    """A request the console refuses before calling the server."""


class BadParameter(ConsoleError):
    def __init__(self, parameter: str, problem: str) -> None:
        super().__init__(f"{parameter}: {problem}")
        self.parameter = parameter
        self.problem = problem


def error_body(status: str, message: str, parameter: str | None = None) -> dict[str, dict[str, str]]:
    error = {"status": status, "message": message}
    if parameter is not None:
        error["parameter"] = parameter
    return {"error": error}


def describe(error: SkillstateError) -> str:
    """The server's message, with the field violations it does not already name."""
    extra = [f"{field}: {why}" for field, why in error.field_violations if field not in error.message]
    return "; ".join([error.message, *extra])


def server_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, SkillstateError)
    status = error.status.name
    return JSONResponse(error_body(status, describe(error)), HTTP_STATUS.get(status, 502))


def bad_parameter(request: Request, error: Exception) -> Response:
    assert isinstance(error, BadParameter)
    return JSONResponse(error_body("INVALID_ARGUMENT", str(error), error.parameter), 400)


def http_error(request: Request, error: Exception) -> Response:
    """Starlette's own (an unknown path, a wrong method): JSON under /api/, text elsewhere."""
    assert isinstance(error, HTTPException)
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse(error.detail, error.status_code, headers=error.headers)
    status = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(error.status_code, "INVALID_ARGUMENT")
    return JSONResponse(error_body(status, error.detail), error.status_code, headers=error.headers)


HANDLERS = {SkillstateError: server_error, BadParameter: bad_parameter, HTTPException: http_error}
"""Starlette's exception handlers for the three."""
