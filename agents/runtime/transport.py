"""How an agent reaches the state server: its observations and its writes over one session (the default), or
over unary calls and an observation stream of their own (`unary`, to compare the two).

Both present the session's interface (`observations`, `submit`, `ack`: `clients.Session`), so that a runtime
is written once and every runtime of a comparison uses the same transport. Reads of the state stay unary
calls either way: a session carries no read.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from skillstate.clients import Observation, PatchResult, StateClient

SESSION, UNARY = "session", "unary"
TRANSPORTS = (SESSION, UNARY)


class Link(Protocol):
    """What an agent sends and receives over, whichever the transport."""

    def observations(self) -> AsyncIterator[Observation]: ...

    async def submit(self, patch: Mapping[str, Any], *, base_revision: int, action: Any = None) -> PatchResult: ...

    async def ack(self, sequences: Sequence[int], *, requeue: bool = False) -> None: ...


@dataclass(frozen=True)
class Unary:
    """The session's interface over unary calls: a submit is a SubmitPatch, an ack an AckObservations, and
    the observations a StreamObservations call."""

    client: StateClient
    execution_id: str
    agent_id: str
    skills: Sequence[str] = ()
    group: str = ""
    ack_deadline: float | None = None

    def observations(self) -> AsyncIterator[Observation]:
        return self.client.observations(
            self.execution_id, self.agent_id, skills=self.skills, group=self.group, ack_deadline=self.ack_deadline
        )

    async def submit(self, patch: Mapping[str, Any], *, base_revision: int, action: Any = None) -> PatchResult:
        return await self.client.submit_patch(
            self.execution_id, patch, agent_id=self.agent_id, base_revision=base_revision, action=action
        )

    async def ack(self, sequences: Sequence[int], *, requeue: bool = False) -> None:
        await self.client.ack_observations(
            self.execution_id, self.group, sequences, agent_id=self.agent_id, requeue=requeue
        )


def check_transport(transport: str) -> str:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    return transport


@contextlib.asynccontextmanager
async def connect(
    client: StateClient,
    execution_id: str,
    agent_id: str,
    transport: str = SESSION,
    *,
    skills: Sequence[str] = (),
    group: str = "",
    ack_deadline: float | None = None,
) -> AsyncIterator[Link]:
    """One agent's link for the length of the block: its session (ended when the block ends, once every
    submit is answered), or its unary calls. The arguments are those of `StateClient.session`."""
    if check_transport(transport) == UNARY:
        yield Unary(client, execution_id, agent_id, skills, group, ack_deadline)
        return
    async with client.session(
        execution_id, agent_id=agent_id, skills=skills, group=group, ack_deadline=ack_deadline
    ) as session:
        yield session
