"""The console's ASGI app: the pages, their assets, the JSON API and the event streams.

The pages are static files (static/: HTML, vanilla JavaScript modules, CSS, no build step, nothing loaded
from elsewhere); each reads the API from the browser. A page's address names what it shows, so it can be
bookmarked and reloaded: /, /executions/ID, /skills, /skills/NAME.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from . import api, events
from .context import Console
from .errors import HANDLERS
from .security import Hardened

STATIC = Path(__file__).with_name("static")
PAGES = {
    "/": "executions.html",
    "/executions/{execution_id}": "execution.html",
    "/skills": "skills.html",
    "/skills/{name}": "skill.html",
}


class _Assets(StaticFiles):
    """The pages' scripts and styles, revalidated (ETag) on every load: an upgraded console runs no stale ones."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "no-cache"
        return response


def create_app(console: Console, *, loopback_only: bool = True) -> Starlette:
    """The console of `console.upstream`. `loopback_only` refuses requests whose Host is not a loopback name
    (security.py): set it when listening on loopback."""
    app = Starlette(
        routes=[*_pages(), *_api(), Mount("/static", _Assets(directory=STATIC), name="static")],
        middleware=[Middleware(Hardened, loopback_only=loopback_only)],
        exception_handlers=HANDLERS,
    )
    app.state.console = console
    return app


def _pages() -> list[BaseRoute]:
    def page(path: str, file: str) -> Route:
        async def endpoint(request: Request) -> Response:
            return FileResponse(STATIC / file, headers={"cache-control": "no-cache"})

        return Route(path, endpoint, methods=["GET"])

    return [page(path, file) for path, file in PAGES.items()]


def _api() -> list[BaseRoute]:
    executions = "/api/executions/{execution_id}"
    return [
        Route("/api/info", api.info),
        Route("/api/executions", api.executions),
        Route("/api/live/executions", events.executions),
        Route(executions, api.execution),
        Route(f"{executions}/state", api.state),
        Route(f"{executions}/history", api.history),
        Route(f"{executions}/events", events.revisions),
        Route(f"{executions}/observations", events.observations),
        Route("/api/skills", api.skills),
        Route("/api/skills/{name}", api.skill),
        Route("/api/hydrate", api.hydrate, methods=["POST"]),
    ]
