"""The transcript-sharing group chat under a timed world: agents take turns, as group-chat frameworks run them.

Agents that share one transcript cannot write concurrently: one speaker holds the floor at a time, chosen
round robin among the agents whose skill has work waiting (the selection of AutoGen's GroupChatManager in
round-robin mode). The speaker answers the oldest waiting event of its skill (or its own failed action first,
with the failure in the observation), seeing the whole conversation so far, the result of every action
included; its action reaches the world as every agent's does, over the speaker's own session (which carries
its observations too; the floor reads the events of every skill on a session of its own). The events,
deadlines, scoring, model and transport are those of the SKILL.state team (agent.py): only the way agents
share what they know differs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from skillstate.clients import Observation, State, StateClient

from ..protocol.prompts import render_observation
from ..protocol.reply import Reply
from ..runtime.agent import Agent, payload_of
from ..runtime.contexts import Turn
from ..runtime.transport import SESSION, Link, check_transport, connect
from .inbox import DONE, EVENT, OUTCOME

FLOOR = "groupchat-floor"
"""The agent id under which the floor reads the events of every skill."""


class Speaker(Agent):
    """One agent of the group chat: it never writes Σ; its action names the event it answers."""

    event_id = ""

    def submission(self, reply: Reply, state: State) -> tuple[dict[str, Any], Any] | None:
        return {}, {"event": self.event_id, "do": reply.action}


class Floor:
    """Gives the floor to one speaker at a time until the world says it is done."""

    def __init__(
        self,
        client: StateClient,
        execution_id: str,
        speakers: Sequence[Speaker],
        conversation: list[Turn],
        outcome_retries: int = 2,
        transport: str = SESSION,
    ):
        self.client = client
        self.transport = check_transport(transport)
        """How the floor reads the events of every skill: a session of its own, or a stream (`unary`)."""
        self.execution_id = execution_id
        self.speakers = list(speakers)
        self._chat = conversation
        """The conversation every speaker sees: their turns, and the result of every action (the world's
        answer is a message of the chat, as a group-chat framework appends a tool's result)."""
        self.outcome_retries = outcome_retries
        self._waiting: dict[str, collections.deque[Mapping[str, Any]]] = {
            s.skills[0]: collections.deque() for s in speakers
        }
        self._retry: dict[str, collections.deque[Mapping[str, Any]]] = {
            s.agent_id: collections.deque() for s in speakers
        }
        self._tries: collections.Counter[str] = collections.Counter()
        self._turn = 0
        self.turns = 0

    async def run(self) -> None:
        inbox: asyncio.Queue[Observation | BaseException] = asyncio.Queue()
        async with contextlib.AsyncExitStack() as stack:
            floor = connect(self.client, self.execution_id, FLOOR, self.transport, skills=sorted(self._waiting))
            links = [await stack.enter_async_context(floor)]
            for speaker in self.speakers:  # what is addressed to the speaker itself, and its writes
                links.append(await stack.enter_async_context(speaker.connected(skills=())))
            readers = [asyncio.create_task(self._read(inbox, link)) for link in links]
            try:
                while True:
                    while not inbox.empty() or not self._has_work():
                        if self._take(await inbox.get()):
                            return
                    await self._give_floor()
            finally:
                for reader in readers:
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader

    async def _read(self, inbox: asyncio.Queue[Observation | BaseException], link: Link) -> None:
        try:
            async for observation in link.observations():
                await inbox.put(observation)
        except Exception as error:
            await inbox.put(error)

    def _take(self, item: Observation | BaseException) -> bool:
        """File one observation; True when the world is done."""
        if isinstance(item, BaseException):
            raise item
        payload = payload_of(item.payload)
        if item.kind == DONE:
            return bool(item.to == self.speakers[0].agent_id)  # every speaker is told; one of them is enough
        if item.kind == EVENT and item.to.startswith("skill:"):
            self._waiting[item.to.removeprefix("skill:")].append(payload)
        elif item.kind == OUTCOME:
            self._chat.append(Turn(render_observation(payload), "", item.to))  # the result joins the chat
            if not payload.get("handled"):
                self._tries[str(payload["event_id"])] += 1
                if self._tries[str(payload["event_id"])] <= self.outcome_retries:
                    self._retry[item.to].append(payload)
        return False

    def _has_work(self) -> bool:
        return any(self._waiting.values()) or any(self._retry.values())

    async def _give_floor(self) -> None:
        """The next speaker in turn with work waiting answers one observation."""
        for offset in range(len(self.speakers)):
            speaker = self.speakers[(self._turn + offset) % len(self.speakers)]
            queue = self._retry[speaker.agent_id] or self._waiting[speaker.skills[0]]
            if queue:
                self._turn = (self._turn + offset + 1) % len(self.speakers)
                payload = queue.popleft()
                speaker.event_id = str(payload["event_id"])
                speaker.steps += 1
                self.turns += 1
                await speaker.answer(render_observation(payload))
                return
