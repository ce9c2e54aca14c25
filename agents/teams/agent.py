"""A SKILL.state agent that works beside others of its skill, at once, over one execution.

Every event of its skill reaches it over its session (runtime/agent.py): as its own observations (every agent of
the skill sees every event, and claims.py decides who handles it), or through the skill's consumer group,
which the session joins (the server hands each event to one member; the claim still guards against a
redelivery acting twice). The claim is a state write, not a model call: an agent that loses spends no
tokens. The winner asks its model (P, Σ and the event only, as every SKILL.state step) and submits the patch
and the action together with `done` on its claim; the action takes effect only if that revision commits.

An agent told that its action failed reopens its claim and asks again, shown the failure and what the patches
sent with its actions on the event wrote (actions.py). Out of attempts, it asks once more only to take that
record back (GIVE_UP), and hands the event back in the same revision: its claim released, and the action
`{"event": ..., "hand_back": true}`, on which the world announces the event to the skill again for another
agent. The agent that handed it back holds it as if another held it, and takes it again only if no one did (in
a consumer group: gives it back, and the group hands it to another member as soon as one is free, or back to
this one if no other is left); it hands an event back once, and lets it go after that. The record is taken back
on the other ways out too: the event taken over during a retry (then nothing is released), a retry's replies
all refused or a Finish (the event is handed back), and once the world is done (the agent waits up to
OUTCOME_WAIT for the outcomes of its actions). Only a take-back whose every reply is refused leaves the record
(`records_left`). While its model is asked, an agent renews its claim every half lease (for `hold_seconds` at
most), so a slow call keeps its event: a takeover needs an agent that died or stalled.

Events another agent holds are looked at again as their leases may run out, so the work of an agent that
died or stalled goes to another. A fault for tests: `die_after` makes the agent crash at an event it takes
up, right after its claim.

With `feedback` (`--rezip`, sims/team_rezip.py) the agent may expand macros as any agent does, and reports its
outcome once the run is over. It works on events one after another, and the failure of an event's action
comes later, as the outcome of that event: the macros that failed are those expanded for the step that chose
that action (remembered per event), whatever the agent did since. A step given up, or ended by Finish, gives
its event back: a failure too. An agent that dies reports nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skillstate.clients import ConflictError, Observation, State

from ..protocol.prompts import render_observation
from ..protocol.reply import Reply
from ..runtime.agent import Agent, is_finish, payload_of
from ..runtime.transport import Link
from . import claims, journal
from .actions import EventActions, Worked, hand_back_action
from .claims import Standing
from .held import HeldEvents
from .inbox import DONE, OUTCOME, START, Inbox

OUTCOME_WAIT = 5.0
"""Seconds an agent waits in all, once the world is done, for the outcomes of the actions it submitted (the
world runs them as they commit: they come at once, unless the world is gone)."""
NOTE_ATTEMPTS = 3
"""Writes of a line to Σ's notes before it is counted lost (`notes_lost`): each reads the notes again."""


class AgentDied(RuntimeError):
    """The `die_after` fault: the agent stops mid-run, holding its claim."""


@dataclass(frozen=True)
class Coordination:
    """How the agents of one skill share its events."""

    group: bool = False
    """Through the skill's consumer group (True), or every agent reading every event (False)."""
    lease_ticks: int = 10
    """How long a claim holds before another agent may take the event over."""
    tick_ms: float = 100.0
    """The world's tick, to turn leases into wall-clock waits."""
    outcome_retries: int = 2
    """New attempts at an event after the world reported that its action did not handle it."""
    journal: bool = False
    """Keep Σ's audit trail and shift notes (journal.py)."""
    hold_seconds: float = 30.0
    """How long an agent renews its claim during one model call at most: a call that takes longer is taken to
    have stalled, and its lease runs out so that another agent may take the event over."""
    die_after: int | None = None
    """A fault for tests: crash at the Nth event this agent takes up, right after claiming it (holding the
    claim if it won it)."""

    @property
    def lease_seconds(self) -> float:
        return self.lease_ticks * self.tick_ms / 1000


class TeamAgent(Agent):
    """One of several agents of a skill; create with the Agent arguments plus `coordination`."""

    def __init__(self, *args: Any, coordination: Coordination, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.coordination = coordination
        self.counts: collections.Counter[str] = collections.Counter()
        """taken_up, claims, claim_losses, takeovers, abandoned, early_finish, gave_up, notes_lost: what
        coordination cost it."""
        self._held = HeldEvents(coordination.lease_seconds)
        self._actions = EventActions()
        self._event: str | None = None
        """The event the model is being asked about (what `submission` claims done)."""
        self._giving_back: bool | None = None
        """The model is asked only to take back a failed action (`_give_back`): True to hand the event back
        in the same revision, False to submit the patch alone, None when it is not."""
        self._written: dict[str, Any] = {}
        """The data patch of the latest submission."""
        self._handed_back: set[str] = set()
        """The events this agent handed back (each at most once: out of attempts again, it lets the event go)."""
        self._requeued: set[int] = set()
        """Sequences of the events this agent handed back that its group gave it, and it gave back."""
        self._expanded_for: dict[str, frozenset[str]] = {}
        """event id -> the macros expanded for the latest step on it (`--rezip`), blamed if its action fails."""
        self.finished = False
        self._die_after_claiming = False
        self.ready = asyncio.Event()
        """Set once its stream delivers the run's start: it receives whatever is published from then on."""

    @property
    def group(self) -> str:
        return self.skills[0]

    async def run(self) -> None:
        """Handle events until the world says it is done, or the model says Finish (see `ended`)."""
        options: dict[str, Any] = {}
        if self.coordination.group:
            options = {"group": self.group, "ack_deadline": self.coordination.lease_seconds}
        async with self.connected(**options) as link:
            await self._handle(link)
        await self.report_outcome()

    async def _handle(self, link: Link) -> None:
        """The run over `link`: its observations handled in turn, and the held events looked at again as
        their leases may run out."""
        async with Inbox(link) as inbox:
            while not self.finished and not inbox.world_done:
                if self._held.due:  # busy or not: leases run out
                    await self._revisit()
                    continue
                observation = await inbox.next(self._held.wait())
                if observation is None or observation.kind == DONE:
                    continue
                payload = payload_of(observation.payload)
                if observation.kind == START:
                    self.ready.set()
                elif observation.kind == OUTCOME:
                    await self._on_outcome(payload, retry=True)
                else:
                    await self._on_event(payload, observation)
            deadline = asyncio.get_running_loop().time() + OUTCOME_WAIT
            while not self.finished and self._actions.awaiting:  # the world is done: take back what failed
                observation = await inbox.next(max(0.0, deadline - asyncio.get_running_loop().time()))
                if observation is None:
                    break
                if observation.kind == OUTCOME:
                    await self._on_outcome(payload_of(observation.payload), retry=False)

    @property
    def ended(self) -> str:
        """How `run` ended: `finished`, or `finished_early` when the model said Finish."""
        return "finished_early" if self.finished else "finished"

    async def _on_event(self, payload: Mapping[str, Any], observation: Observation) -> None:
        event_id = str(payload["event_id"])
        if payload.get("handed_back_by") == self.agent_id:  # announced again for the others
            if not self.coordination.group:
                self._held.hold(event_id, payload, observation)  # taken again only if none of them takes it
                return
            if observation.sequence not in self._requeued:  # for another member: back here only if none is left
                self._requeued.add(observation.sequence)
                await self._ack(observation, requeue=True)
                return
        state = await self.read_state()
        where = claims.standing(state.state, event_id, self.agent_id)
        if where is Standing.DONE and claims.settled(state.state, event_id):
            await self._ack(observation)
        elif where in (Standing.HELD, Standing.DONE):  # done, but its action may still fail
            self._held.hold(event_id, payload, observation)
            await self._ack(observation)  # the lease, not the group, decides when it may be taken over
        else:
            await self._take(event_id, payload, observation, state, where)

    async def _take(
        self, event_id: str, payload: Mapping[str, Any], observation: Observation, state: State, where: Standing
    ) -> None:
        """Claim the event (unless it is this agent's already), then work on it."""
        self._held.forget(event_id)
        self._actions.taken(event_id)
        self.counts["taken_up"] += 1
        if self.coordination.die_after is not None and self.counts["taken_up"] >= self.coordination.die_after:
            self._die_after_claiming = True
        if where is not Standing.MINE or claims.lapsed(state.state, event_id):
            if not await self._claim(event_id, state):
                self.counts["claim_losses"] += 1
                self._held.hold(event_id, payload, observation)
                await self._ack(observation)
                if self._die_after_claiming:
                    raise AgentDied(
                        f"{self.agent_id} dies at {event_id}, having lost its claim (a test fault)"
                    ) from None
                return
            self.counts["claims"] += 1
            self.counts["takeovers"] += where is Standing.EXPIRED
        if self._die_after_claiming:
            raise AgentDied(f"{self.agent_id} dies at {event_id}, holding its claim if it won one (a test fault)")
        acted = await self._work(event_id, payload)
        if acted is Worked.GAVE_UP:
            self._gave_up_on("gave_up")
            await self._release(event_id)
        await self._ack(observation, requeue=acted is not Worked.ACTED)  # another member should have it now

    async def _on_outcome(self, payload: Mapping[str, Any], *, retry: bool) -> None:
        """The world ran this agent's action: if it did not handle the event, reopen the claim and try again
        (with `retry`, while attempts are left), or else take back what the action recorded."""
        event_id = str(payload["event_id"])
        expanded = self._expanded_for.pop(event_id, frozenset())
        if payload.get("handled"):
            self._actions.settled(event_id)
            return
        if self.feedback is not None:
            self.feedback.action_failed(expanded)
        tries, recorded = self._actions.failed(event_id)
        failed = {**payload, "recorded": recorded}
        state = await self.read_state()
        if self.coordination.journal and isinstance(payload.get("last_action"), Mapping):
            state = await self._note(event_id, payload["last_action"], state)
        claim = claims.claim_of(state.state, event_id)
        mine = retry and claim is not None and claim.agent == self.agent_id and await self._claim(event_id, state)
        if mine and tries <= self.coordination.outcome_retries:
            worked = await self._work(event_id, failed)
            if worked is Worked.ACTED:
                return
            mine = worked is not Worked.TAKEN_OVER  # taken over meanwhile: the record is still to take back
        await self._give_back(event_id, failed, holding=mine)

    async def _give_back(self, event_id: str, failed: Mapping[str, Any], *, holding: bool) -> None:
        """Ask the model once more, told only to take back what the failed action recorded (GIVE_UP). While
        it `holding` the claim, that patch releases it too, and (the first time) its action hands the event
        back, so that the world announces it again for another agent, with attempts of its own."""
        if holding:
            self._gave_up_on("gave_up")
        self.steps += 1
        self._event, self._giving_back = event_id, holding
        try:
            answered = await self._answer_holding(event_id, render_observation({**failed, "give_up": True}))
        finally:
            self._event, self._giving_back = None, None
            self._actions.settled(event_id)
        if answered is None:  # every reply refused: the record stays in Σ (and shows as drift)
            self.counts["records_left"] += 1
            if holding:
                await self._release(event_id, hand_back=self._hand_back_once(event_id))

    async def _claim(self, event_id: str, state: State) -> bool:
        """Write this agent's claim of the event, leased from Σ's clock, against `state`; False when the claim
        lost to another agent's write (the stale write was refused)."""
        until = claims.clock_of(state.state) + self.coordination.lease_ticks
        try:
            await self.link.submit(claims.claim_patch(event_id, self.agent_id, until), base_revision=state.revision)
        except ConflictError:
            return False
        return True

    async def _note(self, event_id: str, failure: Mapping[str, Any], state: State) -> State:
        """Add a line on a refused action to Σ's notes (journal.py), read again after a concurrent write;
        Σ as it reads afterwards."""
        for _ in range(NOTE_ATTEMPTS):
            try:
                await self.link.submit(journal.note_patch(state.state, self.agent_id, event_id, failure),
                                       base_revision=state.revision)  # fmt: skip
                return await self.read_state()
            except ConflictError:
                state = await self.read_state()
        self.counts["notes_lost"] += 1
        return state

    async def _work(self, event_id: str, payload: Mapping[str, Any]) -> Worked:
        """Ask the model about the event and submit its answer with the claim done."""
        self.steps += 1
        self._event = event_id
        abandoned = self.counts["abandoned"]
        try:
            answered = await self._answer_holding(event_id, render_observation(payload))
        finally:
            self._event = None
            if self.feedback is not None:
                self._expanded_for[event_id] = self.feedback.end_step()
        if answered is None:
            return Worked.TAKEN_OVER if self.counts["abandoned"] > abandoned else Worked.GAVE_UP
        if is_finish(answered):
            self._gave_up_on("early_finish")
            self.finished = True
            return Worked.FINISHED
        self._actions.acted(event_id, self._written)
        return Worked.ACTED

    def _gave_up_on(self, count: str) -> None:
        """Count an event this agent let go unhandled (`gave_up`, `early_finish`): for ReZip, a failure."""
        self.counts[count] += 1
        if self.feedback is not None:
            self.feedback.gave_up()

    def submission(self, reply: Reply, state: State) -> tuple[dict[str, Any], Any] | None:
        assert self._event is not None, "the model is asked only about an event"
        mine = claims.standing(state.state, self._event, self.agent_id) is Standing.MINE
        if not mine and self._giving_back is None:
            self.counts["abandoned"] += 1
            return None  # taken over while this agent was slow: it must not act
        written = {key: value for key, value in claims.visible(reply.state_patch).items()
                   if not (self.coordination.journal and key in journal.KEYS)}  # the runtime's to write  # fmt: skip
        if self._giving_back is not None:
            return self._giving_back_submission(written, state)
        if is_finish(reply):
            return claims.release_patch(self._event), None
        self._written = written
        patch = claims.with_claim(written, claims.done_patch(self._event, self.agent_id))
        if self.coordination.journal:
            patch.update(journal.audit_patch(state.state, self.agent_id, self._event, reply.action))
        return patch, {"event": self._event, "do": reply.action}

    def _giving_back_submission(self, written: dict[str, Any], state: State) -> tuple[dict[str, Any], Any]:
        """The patch that takes back a failed action's record; releasing the claim too while it is still this
        agent's, with the action that hands the event back the first time."""
        event_id = self._event
        assert event_id is not None
        if not self._giving_back or claims.standing(state.state, event_id, self.agent_id) is not Standing.MINE:
            return written, None
        action = hand_back_action(event_id) if self._hand_back_once(event_id) else None
        return claims.with_claim(written, claims.release_patch(event_id)), action

    def _hand_back_once(self, event_id: str) -> bool:
        """Whether to hand the event back now: the first time this agent lets it go, not after."""
        first = event_id not in self._handed_back
        self._handed_back.add(event_id)
        return first

    async def _answer_holding(self, event_id: str, observation: str) -> Reply | None:
        """`answer`, renewing the claim on the event every half lease while the model is asked (for at most
        `hold_seconds`), so that a slow call keeps its event."""
        renewal = asyncio.ensure_future(self._renew(event_id))
        try:
            return await self.answer(observation)
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal

    async def _renew(self, event_id: str) -> None:
        every = self.coordination.lease_seconds / 2
        for _ in range(int(self.coordination.hold_seconds / every)):
            await asyncio.sleep(every)
            state = await self.read_state()
            if claims.standing(state.state, event_id, self.agent_id) is not Standing.MINE:
                return
            until = claims.clock_of(state.state) + self.coordination.lease_ticks
            try:
                await self.link.submit(claims.renew_patch(event_id, self.agent_id, until), base_revision=state.revision)
            except ConflictError:
                return  # taken over: the late answer will be refused

    def _visible(self, state: Mapping[str, Any]) -> Mapping[str, Any]:
        return super()._visible(claims.visible(state))

    async def _release(self, event_id: str, *, hand_back: bool = False) -> None:
        """Let another agent take the event over at once (this one gave up on it); with `hand_back`, the
        world announces it again too."""
        state = await self.read_state()
        if claims.standing(state.state, event_id, self.agent_id) is not Standing.MINE:
            return
        action = hand_back_action(event_id) if hand_back else None
        with contextlib.suppress(ConflictError):  # taken over meanwhile
            await self.link.submit(claims.release_patch(event_id), base_revision=state.revision, action=action)

    async def _revisit(self) -> None:
        """Look again at the events others hold: settled ones are forgotten, expired ones taken over (one at a
        time: the state moves on with each), and the next look is half a lease away."""
        state = await self.read_state()
        for event_id, payload, observation in self._held:
            where = claims.standing(state.state, event_id, self.agent_id)
            if where is Standing.DONE:
                if claims.settled(state.state, event_id):
                    self._held.forget(event_id)
            elif where in (Standing.EXPIRED, Standing.FREE, Standing.MINE):
                await self._take(event_id, payload, observation, state, where)
                return  # look again at once: the state moved on
        self._held.looked()

    async def _ack(self, observation: Observation, *, requeue: bool = False) -> None:
        if self.coordination.group and observation.delivery:
            await self.link.ack([observation.sequence], requeue=requeue)
