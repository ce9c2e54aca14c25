"""The live parts of the pages, as server-sent events.

- `revisions`: an execution's new revisions, fed by the SDK's watch (which resumes a cut gRPC stream itself).
  Each event's id is its revision, so a browser that reconnects (EventSource does, sending the last id as
  Last-Event-ID) resumes after the last revision it received: none is missed or repeated.
- `observations`: an execution's observations, fed by the SDK's plain observation stream, which reads the
  stored observations and follows new ones without taking any from a consumer group (only a stream that
  joins a group takes part in its deliveries). Each event's id is its sequence, resumed the same way.
- `executions`: the executions list. The server has no watch of the list, so the stream lists the page
  again every `LIST_INTERVAL` seconds and sends it when it changed.

Each stream first makes one read call, so that a missing execution or a token without the right is an HTTP
error status rather than a stream that ends at once. A later failure is sent as a `failure` event naming the
status; it ends a revision or observation stream (the SDK has already retried what can be retried), and the
list stream where listing again cannot help. A page stops reconnecting after a failure retrying cannot mend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from skillstate.clients import RevisionEvent, SkillRegistryClient, SkillstateError, Snapshot, StateClient

from . import params
from .api import head_of, list_page
from .context import console_of
from .errors import BadParameter, describe, error_body
from .shapes import dumps
from .sse import Event, EventStream
from .upstream import closing

LIST_INTERVAL = 2.0
"""Seconds between two listings of the executions list stream."""
FINAL = frozenset({"NOT_FOUND", "PERMISSION_DENIED", "UNAUTHENTICATED", "INVALID_ARGUMENT", "OUT_OF_RANGE"})
"""Statuses after which listing again cannot help: the list stream ends with them."""
LIBRARY_SKILLS = 100
"""On an open server, the observation stream reads what is sent to the first this many skills of the library."""


def resumed_after(request: Request, name: str, default: int) -> int:
    """Where a stream starts: after the Last-Event-ID a reconnecting browser sends, else after `name`."""
    last = request.headers.get("last-event-id", "")
    if last:
        return params.parse_whole("Last-Event-ID", last)
    return params.whole(request.query_params, name, default)


async def revisions(request: Request) -> Response:
    """Every revision after `from` (default: the head when the stream opens), then new ones as they commit."""
    console = console_of(request)
    state, execution_id = console.upstream.state, request.path_params["execution_id"]
    head = await head_of(state, execution_id)
    cursor = resumed_after(request, "from", head.head_revision)
    if cursor > head.head_revision:
        raise BadParameter("from", f"revision {cursor} is past the head revision {head.head_revision}")
    return EventStream(_watch(state, execution_id, cursor), console.closing)


async def _watch(state: StateClient, execution_id: str, cursor: int) -> AsyncGenerator[Event, None]:
    try:
        async with closing(state.watch(execution_id, from_revision=cursor)) as watched:
            async for item in watched:
                yield Event(_kind(item), item, item.revision)
    except SkillstateError as e:
        yield _error(e)


def _kind(item: RevisionEvent | Snapshot) -> str:
    """`snapshot`: the whole state, sent first when the revisions after `from` were compacted away."""
    return "snapshot" if isinstance(item, Snapshot) else "revision"


async def observations(request: Request) -> Response:
    """Observations after `after` (default 0: from the first) addressed to everyone, to `agent` and to the
    `skills` (comma-separated). With a token the server reads as the token's agent and allows only its
    credential's skills (default: none); on an open server the default agent is `console` and the default
    skills the library's. The first event, `reading`, says what the stream reads."""
    console = console_of(request)
    upstream, execution_id = console.upstream, request.path_params["execution_id"]
    query = request.query_params
    agent = params.text(query, "agent", longest=128) or upstream.observer
    skills = params.names(query, "skills")
    after = resumed_after(request, "after", 0)
    await head_of(upstream.state, execution_id)
    if skills is None:
        skills = [] if upstream.has_token else await _library_skills(upstream.skills)
    reading = {"agent": agent, "skills": skills, "after": after}
    stream = upstream.state.observations(execution_id, agent, skills=skills, after_sequence=after)

    async def events() -> AsyncGenerator[Event, None]:
        yield Event("reading", reading)
        try:
            async with closing(stream) as observed:
                async for observation in observed:
                    yield Event("observation", observation, observation.sequence)
        except SkillstateError as e:
            yield _error(e)

    return EventStream(events(), console.closing)


async def _library_skills(registry: SkillRegistryClient) -> list[str]:
    names: list[str] = []
    async with closing(registry.list_skills(page_size=LIBRARY_SKILLS)) as found:
        async for summary in found:
            names.append(summary.name)
            if len(names) == LIBRARY_SKILLS:
                break
    return names


async def executions(request: Request) -> Response:
    """The page of executions that GET /api/executions with the same parameters gives, sent again whenever a
    listing every LIST_INTERVAL seconds finds it changed."""
    first = await list_page(request)
    return EventStream(_relisted(first, lambda: list_page(request)), console_of(request).closing)


async def _relisted(
    first: dict[str, Any], list_again: Callable[[], Awaitable[dict[str, Any]]]
) -> AsyncGenerator[Event, None]:
    page, sent = first, b""
    while True:
        encoded = dumps(page)
        if encoded != sent:
            yield Event("page", page)
            sent = encoded
        await asyncio.sleep(LIST_INTERVAL)
        try:
            page = await list_again()
        except SkillstateError as e:
            yield _error(e)
            if e.status.name in FINAL:
                return
            sent = b""  # the next listing that works is sent, whether or not it changed: the page recovered


def _error(e: SkillstateError) -> Event:
    return Event("failure", error_body(e.status.name, describe(e)))
