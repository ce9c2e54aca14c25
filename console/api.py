"""The JSON API the pages read: each endpoint is one or two read calls to the server through the SDK.

Every page of results is bounded (`MAX_PAGE`, `MAX_SKILLS`) so that one request costs the console's event loop
a bounded time, whatever the server holds. The console never writes: the hydrate call is a read of the
skill library (it only adds the hydration to the server's short list of recent ones, for Expand).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from skillstate.clients import (
    HistoryPage,
    HydratedMacro,
    NotFoundError,
    Skill,
    SkillRegistryClient,
    SkillSummary,
    StateClient,
)

from . import params, shapes
from .context import console_of
from .errors import BadParameter
from .shapes import JSONResponse, state_document
from .upstream import closing

PAGE = 50
"""Executions or revisions a page holds when the request does not say."""
MAX_PAGE = 200
"""Executions or revisions a page may hold at most (a revision carries its patch, up to 1 MiB: the server
also ends a history page before 4 MiB)."""
MAX_SKILLS = 500
"""Skills the library listing shows at most, by name (the SDK reads the library a page at a time)."""
MAX_BODY = 64 * 1024
"""The largest request body (a hydrate request)."""
MAX_QUERY = 4096
"""The longest hydrate query (the server's limit)."""
MAX_BUDGET = 100_000
"""The largest hydrate budget, in tokens (the server's limit)."""


async def info(request: Request) -> Response:
    """Which server the console reads, and whether with a token (the pages show it in their header)."""
    upstream = console_of(request).upstream
    return JSONResponse({"server": upstream.target, "token": upstream.has_token})


async def executions(request: Request) -> Response:
    return JSONResponse(await list_page(request))


async def list_page(request: Request) -> dict[str, Any]:
    """One page of the executions the token may read, by id: `prefix`, `page_token`, `page_size`."""
    query = request.query_params
    prefix = params.text(query, "prefix")
    token = params.text(query, "page_token")
    size = params.whole(query, "page_size", PAGE, low=1, high=MAX_PAGE)
    page = await console_of(request).upstream.state.list_executions(prefix, page_size=size, page_token=token)
    return {"executions": page.executions, "next_page_token": page.next_page_token}


async def execution(request: Request) -> Response:
    """One execution's summary: head revision, times, agents seen."""
    state = console_of(request).upstream.state
    execution_id = request.path_params["execution_id"]
    page = await state.list_executions(execution_id, page_size=1)  # its own id sorts first among its prefix's
    if page.executions and page.executions[0].execution_id == execution_id:
        return JSONResponse(page.executions[0])
    await head_of(state, execution_id)  # NOT_FOUND, or PERMISSION_DENIED, as the server decides
    raise NotFoundError(f"execution {execution_id!r} is not listed")


async def head_of(state: StateClient, execution_id: str) -> HistoryPage:
    """The execution's head and compact revisions, reading no revision (a page that starts past any): what
    an event stream checks before it starts, so that a missing execution is a 404 and not a broken stream."""
    return await state.get_history(execution_id, from_revision=params.INT64, page_size=1)


async def state(request: Request) -> Response:
    """The state at head, or `at` a revision (time travel)."""
    at = params.optional_whole(request.query_params, "at")
    execution_id = request.path_params["execution_id"]
    read = await console_of(request).upstream.state.get_state_json(execution_id, at_revision=at)
    return Response(state_document(read), media_type="application/json")


async def history(request: Request) -> Response:
    """Revisions `from`..`to` (0: head), a page of `page_size`; `page_token` continues a page."""
    query = request.query_params
    first = params.whole(query, "from", 1)
    last = params.whole(query, "to", 0)
    size = params.whole(query, "page_size", PAGE, low=1, high=MAX_PAGE)
    token = params.text(query, "page_token")
    execution_id = request.path_params["execution_id"]
    page = await console_of(request).upstream.state.get_history(
        execution_id, first, last, page_size=size, page_token=token
    )
    return JSONResponse(page)


async def skills(request: Request) -> Response:
    """The library's current skills by name, the first MAX_SKILLS of them (`truncated` says if there are more)."""
    listed: list[SkillSummary] = []
    truncated = False
    async with closing(console_of(request).upstream.skills.list_skills(page_size=100)) as all_skills:
        async for summary in all_skills:
            if len(listed) == MAX_SKILLS:
                truncated = True
                break
            listed.append(summary)
    return JSONResponse({"skills": listed, "truncated": truncated})


async def skill(request: Request) -> Response:
    """A skill's section graph (`version`: an older one), with the macros that hold runs of its sections."""
    version = params.whole(request.query_params, "version", 0, low=0)
    registry = console_of(request).upstream.skills
    found = await registry.get_skill(request.path_params["name"], version=version)
    macros = [] if version else await macros_of(registry, found)
    return JSONResponse(shapes.skill(found, macros))


async def macros_of(registry: SkillRegistryClient, skill: Skill) -> list[HydratedMacro]:
    """The macros a hydration of the skill's own text, from it alone, shows: the server reports macros only
    in hydrations (GetSkill has none), and a context for the skill's whole text shows every macro whose
    occurrence that text selects whole. Only for the current version, which is the one hydrations read."""
    text = " ".join(f"{s.title} {s.text}" for s in skill.sections)[:MAX_QUERY]
    if not text.strip():
        return []
    name = skill.summary.name
    hydrated = await registry.hydrate(text, budget_tokens=MAX_BUDGET, skill_names=[name])
    return [m for m in hydrated.macros if m.skill == name]


async def hydrate(request: Request) -> Response:
    """POST {"query": TEXT, "budget": TOKENS, "skills": [NAME, ...]}: the context the query gets."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise BadParameter("content-type", "expected application/json")
    try:
        body = orjson.loads(await _body(request))
    except orjson.JSONDecodeError as e:
        raise BadParameter("body", f"not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadParameter("body", "expected a JSON object")
    unknown = sorted(body.keys() - {"query", "budget", "skills"})
    if unknown:
        raise BadParameter(unknown[0], "unknown field (expected query, budget, skills)")
    query = params.checked_text("query", body.get("query"), MAX_QUERY)
    if not query.strip():
        raise BadParameter("query", "must not be empty")
    budget = body.get("budget", 3000)
    if not isinstance(budget, int) or isinstance(budget, bool) or not 1 <= budget <= MAX_BUDGET:
        raise BadParameter("budget", f"expected a whole number of tokens in 1..{MAX_BUDGET}, got {repr(budget)[:40]}")
    names = body.get("skills", [])
    if not isinstance(names, list) or len(names) > 100 or not all(isinstance(n, str) for n in names):
        raise BadParameter("skills", "expected a list of at most 100 skill names")
    registry = console_of(request).upstream.skills
    return JSONResponse(shapes.hydrated(await registry.hydrate(query, budget_tokens=budget, skill_names=names)))


async def _body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BadParameter("body", f"more than {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
