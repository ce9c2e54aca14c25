"""The base of the service clients: a channel, its stub, and the retry loops of calls and streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Self, TypeVar

import grpc

from ._channel import ClientTLS, open_channel
from ._errors import SkillstateError, UnavailableError, from_rpc_error
from ._owners import MAX_REDIRECTS, Owners
from ._retry import Reopenings, RetryPolicy

T = TypeVar("T")

_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)


class RpcClient:
    """A channel to a skillstate server, the service's stub, and the retry loops its calls and streams share.

    A subclass names its generated stub class in `_stub_class`. `token` is sent on every call, `tls`
    encrypts the channel. Pass `channel` (see `open_channel`) to share one channel between clients of several
    services (the caller then closes it).
    """

    _stub_class: Any

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        tls: ClientTLS | None = None,
        channel: grpc.aio.Channel | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float | None = 30.0,
    ) -> None:
        self._channel = channel if channel is not None else open_channel(target, token=token, tls=tls)
        self._owns_channel = channel is None
        self._stub: Any = self._stub_class(self._channel)
        self._retry = retry
        self._timeout = timeout
        self._owners: Owners | None = None

    def _route(self, request: Any) -> tuple[Any, Sequence[tuple[str, str]] | None]:
        """The stub to send `request` to, and the metadata to send with it: for a client that follows owners,
        its execution's owner's when known (owners.py)."""
        execution_id = getattr(request, "execution_id", "")
        if self._owners is None or not execution_id:
            return self._stub, None
        return self._owners.route(execution_id)

    def _followed(self, request: Any, error: SkillstateError, stub: Any) -> bool:
        """Whether the failed call should go at once to the owner the error names."""
        execution_id = getattr(request, "execution_id", "")
        return self._owners is not None and bool(execution_id) and self._owners.learn(execution_id, error, stub)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owners is not None:
            await self._owners.close()
        if self._owns_channel:
            await self._channel.close()

    async def _call(self, method: str, request: Any, *, retry: bool = True) -> Any:
        """Call the stub's `method`, retrying UNAVAILABLE within the retry policy (with `retry`)."""
        policy, loop = self._retry, asyncio.get_running_loop()
        attempts = policy.attempts if retry else 1
        give_up_at = loop.time() + policy.deadline if retry and policy.deadline is not None else None
        attempt = redirects = 0
        while True:
            timeout = self._timeout
            if give_up_at is not None:
                left = give_up_at - loop.time()
                timeout = left if timeout is None else min(timeout, left)
            stub, metadata = self._route(request)
            try:
                return await getattr(stub, method)(request, timeout=timeout, metadata=metadata)
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                if redirects < MAX_REDIRECTS and self._followed(request, error, stub):
                    redirects += 1  # nothing was done (even a call never retried may go on): ask the owner now
                    continue
                if not retry or not isinstance(error, UnavailableError) or attempt == attempts - 1:
                    raise error from None
            pause = policy.backoff(attempt)
            if give_up_at is not None and loop.time() + pause >= give_up_at:
                raise error from None  # the next attempt would start after the deadline: the last error says why
            await asyncio.sleep(pause)
            attempt += 1

    async def _resumable(
        self,
        open_stream: Callable[[int], tuple[Any, Any, Any]],
        decode: Callable[[Any], tuple[int, T] | None],
        cursor: int,
        resume: bool,
    ) -> AsyncIterator[T]:
        """Yield decoded messages (skipping those `decode` returns None for), reopening the stream from the
        last cursor after a resumable failure, within the policy's attempts and deadline. `open_stream(cursor)`
        gives the request, the stub it was sent on, and the call."""
        reopenings, redirects = Reopenings(self._retry), 0
        while True:
            request, stub, call = open_stream(cursor)
            try:
                async for message in call:
                    reopenings.reset()
                    redirects = 0
                    decoded = decode(message)
                    if decoded is not None:
                        cursor, item = decoded
                        yield item
                return
            except grpc.aio.AioRpcError as e:
                if self._followed(request, from_rpc_error(e), stub) and redirects < MAX_REDIRECTS:
                    redirects += 1
                    continue  # nothing was sent yet: open it at the owner now
                pause = reopenings.failed(resumable=resume and e.code() in _RESUMABLE)
                if pause is None:
                    raise from_rpc_error(e) from None
            finally:
                call.cancel()
            await asyncio.sleep(pause)
