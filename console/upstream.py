"""The skillstate server the console reads: one channel, the state and registry clients on it, and who the
console reads observations as."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc

from skillstate.clients import ClientTLS, SkillRegistryClient, StateClient, open_channel

T = TypeVar("T")

OBSERVER = "console"
"""The agent id the console reads observations as on an open server, where a stream must name one. With a
token the server binds the stream to the token's agent instead, so the console names none."""


@dataclass(frozen=True, slots=True)
class Upstream:
    """The server at `target`, called with the console's token (read rights suffice)."""

    target: str
    state: StateClient
    skills: SkillRegistryClient
    has_token: bool
    channel: grpc.aio.Channel

    @classmethod
    def open(cls, target: str, *, token: str | None, tls: ClientTLS | None) -> Upstream:
        channel = open_channel(target, token=token, tls=tls)
        return cls(target, StateClient(channel=channel), SkillRegistryClient(channel=channel), bool(token), channel)

    @property
    def observer(self) -> str:
        """The agent id to send on an observation stream: empty with a token (the server fills in its agent)."""
        return "" if self.has_token else OBSERVER

    async def close(self) -> None:
        await self.channel.close()


def closing(stream: AsyncIterator[T]) -> contextlib.aclosing[AsyncGenerator[T, Any]]:
    """`async with closing(client.watch(...)) as items:`: the SDK's streams are async generators (typed as
    iterators), and one left early must be closed at once, which cancels its gRPC call, not when collected."""
    return contextlib.aclosing(cast(AsyncGenerator[T, Any], stream))
