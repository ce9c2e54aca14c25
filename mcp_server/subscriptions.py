"""Subscriptions to execution state resources, fed by Watch.

One Watch stream per execution that anyone subscribes to (`Feeds`), shared by every subscriber, from the head
revision at the first subscription on; each revision it delivers tells each subscriber that the resource
changed. The Watch stops when the execution's last subscriber goes. Subscribers come in the two forms the
protocol has had:

- `resources/subscribe` and `resources/unsubscribe` (protocol versions up to 2025-11-25, what today's
  clients speak): `notifications/resources/updated` goes to the connection that subscribed, until it
  unsubscribes or the connection ends;
- `subscriptions/listen` (2026-07-28): the listen request's own stream carries the notifications for the
  state resources it names, for as long as that stream is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, cast

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from skillstate.clients import SkillstateError, StateClient

from .errors import protocol_error
from .resources import STATE_URI, execution_of

log = logging.getLogger(__name__)

Notify = Callable[[], Awaitable[None]]
Subscriber = tuple[Hashable, str]
"""(owner, uri): the connection or listen stream that subscribed, and the URI it subscribed to, as it wrote it."""


@dataclass(eq=False)
class _Feed:
    subscribers: dict[Subscriber, Notify] = field(default_factory=dict)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    error: SkillstateError | None = None
    task: asyncio.Task[None] | None = None


class Feeds:
    """The Watch streams of the executions someone subscribed to, and who to tell of each revision."""

    def __init__(self, state: StateClient) -> None:
        self._state = state
        self._feeds: dict[str, _Feed] = {}

    async def subscribe(self, execution_id: str, subscriber: Subscriber, notify: Notify) -> None:
        """Call `notify` after each revision of the execution committed from now on, until the subscriber is
        unsubscribed. Raises what reading the execution raises (NotFoundError, PermissionDeniedError, ...)."""
        feed = self._feeds.get(execution_id)
        if feed is None:
            feed = self._feeds[execution_id] = _Feed()
            feed.task = asyncio.create_task(self._follow(execution_id, feed), name=f"watch {execution_id}")
        feed.subscribers[subscriber] = notify
        try:
            await feed.started.wait()
        except BaseException:  # the subscribe request was cancelled: its client never saw it succeed
            self.unsubscribe(subscriber[0], subscriber[1])
            raise
        if feed.error is not None:
            feed.subscribers.pop(subscriber, None)
            raise feed.error

    def unsubscribe(self, owner: Hashable, uri: str | None = None) -> None:
        """Forget the owner's subscription to `uri`, or all of its subscriptions; stop the Watch streams no one
        is left to hear."""
        for execution_id, feed in list(self._feeds.items()):
            for subscriber in [s for s in feed.subscribers if s[0] == owner and (uri is None or s[1] == uri)]:
                del feed.subscribers[subscriber]
            if not feed.subscribers and feed.task is not None:
                feed.task.cancel()
                del self._feeds[execution_id]

    async def close(self) -> None:
        """Stop every Watch stream."""
        tasks = [feed.task for feed in self._feeds.values() if feed.task is not None]
        self._feeds.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, execution_id: str, feed: _Feed) -> None:
        try:
            try:
                head = (await self._state.get_state(execution_id)).revision
            except SkillstateError as e:
                feed.error = e
                return
            finally:
                feed.started.set()
            try:
                revisions = cast(AsyncGenerator[object, None], self._state.watch(execution_id, from_revision=head))
                async with contextlib.aclosing(revisions):  # the stream ends with the task, not when collected
                    async for _ in revisions:
                        await self._tell(feed)
                ended = "the server ended it"
            except SkillstateError as e:
                ended = str(e)
            # the execution was deleted, the token revoked, or the server stayed away past the retries: a last
            # notification sends the subscribers to read it again, and the read says what happened
            log.warning("the watch of execution %r ended (%s); its subscriptions end with it", execution_id, ended)
            self._forget(execution_id, feed)  # first: a subscriber arriving now starts a Watch of its own
            await self._tell(feed)
        finally:
            self._forget(execution_id, feed)

    def _forget(self, execution_id: str, feed: _Feed) -> None:
        if self._feeds.get(execution_id) is feed:
            del self._feeds[execution_id]

    @staticmethod
    async def _tell(feed: _Feed) -> None:
        for subscriber, notify in list(feed.subscribers.items()):
            try:
                await notify()
            except Exception:  # one subscriber's broken channel must not silence the others
                log.exception("notifying %s failed; dropping the subscription", subscriber[1])
                feed.subscribers.pop(subscriber, None)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """The connection a request came on, whose exit stack runs when the client goes away. mcp 2.3 hands handlers
    no public way to it (its `Context.connection` is not built for them yet); tests/mcp fail if this breaks."""
    connection = getattr(ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise MCPError(INTERNAL_ERROR, "resources/subscribe is unavailable with this version of the mcp package")
    return connection


def _state_uri(uri: str) -> str:
    execution_id = execution_of(uri)
    if execution_id is None:
        raise MCPError(INVALID_PARAMS, f"{uri!r}: only execution state resources ({STATE_URI}) can be subscribed to")
    return execution_id


def serve_subscriptions(server: MCPServer, feeds: Feeds) -> None:
    """Serve resources/subscribe, resources/unsubscribe and subscriptions/listen on `server` from `feeds`.

    The server must be made with `subscriptions=False`, which leaves subscriptions/listen to this module."""

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        execution_id, connection, session = _state_uri(uri), _connection(ctx), ctx.session
        if not connection.state.get(__name__):  # once per connection: forget its subscriptions when it ends
            connection.state[__name__] = True
            connection.exit_stack.callback(feeds.unsubscribe, connection)
        try:
            notify = functools.partial(session.send_resource_updated, uri)
            await feeds.subscribe(execution_id, (connection, uri), notify)
        except SkillstateError as e:
            raise protocol_error(e, uri=uri) from e
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        feeds.unsubscribe(_connection(ctx), str(params.uri))
        return EmptyResult()

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        # the acknowledgment honors only the state resources: nothing else here changes
        uris = params.notifications.resource_subscriptions or ()
        watched = {uri: execution_id for uri in uris if (execution_id := execution_of(uri)) is not None}
        notifications = params.notifications.model_copy(update={"resource_subscriptions": list(watched) or None})
        bus, stream = InMemorySubscriptionBus(), object()  # a bus of its own: its events are its subscriptions'
        try:
            for uri, execution_id in watched.items():
                notify = functools.partial(bus.publish, ResourceUpdated(uri=uri))
                try:
                    await feeds.subscribe(execution_id, (stream, uri), notify)
                except SkillstateError as e:
                    raise protocol_error(e, uri=uri) from e
            return await ListenHandler(bus)(ctx, params.model_copy(update={"notifications": notifications}))
        finally:
            feeds.unsubscribe(stream)

    lowlevel = server._lowlevel_server  # MCPServer has no public way to add these spec methods
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
