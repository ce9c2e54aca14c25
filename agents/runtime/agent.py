"""A single-skill agent over one shared execution: it reads the observations addressed to it, asks its model
for a state patch and an action, and submits both to the server with the revision it saw.

Per step (one observation):
- the prompt comes from the agent's context (contexts.py); for SKILL.state that is P, Σ and O only;
- a reply that breaks the format, or a patch the server refuses (INVALID_ARGUMENT: schema, size), is asked
  again with the error in the observation, the state untouched (the paper's rollback-retry);
- a patch that loses a conflict (ABORTED, under the `reject` policy) is asked again from a fresh read of Σ;
- both are bounded (`Limits`); an agent out of retries submits no change and the action `Wait`, so that
  the environment moves on, and the step is recorded as given up.
The agent finishes when it answers with the action `Finish`. Every model call is recorded (`StepRecord`).
With `feedback` (`--rezip`, rezip.py) a reply may instead ask for a macro's full text, which comes back with
the step's observation (bounded by `Limits.expansions`), and the episode's outcome goes to the registry at its end.
Its observations and its writes go over one session, opened by `run` and ended when the agent finishes
(transport.py; `transport="unary"` makes them unary calls instead, for comparison); Σ is read by unary calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillstate.clients import ConflictError, State, StateClient, ValidationError

from ..protocol.prompts import render_observation
from ..protocol.reply import Reply, ReplyError, parse_expand
from .contexts import Context
from .llm import Completion, complete
from .records import Limits, Recorder, StepRecord
from .rezip import MacroFeedback
from .transport import SESSION, Link, Unary, check_transport, connect

FINISH = "Finish"
WAIT = "Wait"
REJECTED = "Your previous reply was rejected, nothing was applied:"


@dataclass
class Attempts:
    """One step's tries so far: what its retries used of `limits`, the error its next prompt names, and the
    macro texts it asked for (`--rezip`), shown with the observation."""

    limits: Limits
    number: int = 0
    conflicts: int = 0
    invalid: int = 0
    rejection: str | None = None
    expanded: list[str] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        return self.conflicts > self.limits.conflict_retries or self.invalid > self.limits.invalid_retries

    def refused(self, error: str) -> None:
        """The reply broke the format or the server refused its patch: the next prompt says why."""
        self.invalid += 1
        self.rejection = error

    def shown(self, observation: str) -> str:
        """The observation as the next attempt shows it: with the macros expanded and the last refusal."""
        shown = "\n\n".join([observation, *self.expanded])
        return shown if self.rejection is None else f"{shown}\n{REJECTED} {self.rejection}"


class Agent:
    def __init__(
        self,
        client: StateClient,
        execution_id: str,
        agent_id: str,
        *,
        skills: Sequence[str],
        instructions: str,
        model: str,
        context: Context,
        recorder: Recorder,
        limits: Limits = Limits(),
        reads: Sequence[str] | None = None,
        policy_options: Mapping[str, Any] | None = None,
        constrained: bool = False,
        transport: str = SESSION,
        feedback: MacroFeedback | None = None,
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.agent_id = agent_id
        self.skills = list(skills)
        self.feedback = feedback
        """ReZip's evidence from this agent (`--rezip`): macros it may expand, its outcome reported at the end."""
        self.instructions = instructions if feedback is None else feedback.instructions(instructions)
        self.model = model
        self.context = context
        self.recorder = recorder
        self.limits = limits
        self.reads = reads
        """The top-level state keys the skill declares it reads (None: the whole state)."""
        self.policy_options = policy_options
        """Options for the scripted test policy (its think time, say); never sent to a real model."""
        self.constrained = constrained
        """Ask the model for JSON-schema-constrained output (its context's schema), where the model supports
        it. Off by default, for every runtime alike: constraining removes the free reasoning the paper keeps."""
        self.transport = check_transport(transport)
        """How `run` reaches the server: one session (`session`) or unary calls (`unary`), for every runtime."""
        self.link: Link = Unary(client, execution_id, agent_id, self.skills)
        """What the agent's writes go over: its session while `connected` (in `run`), else unary calls (a step
        taken on its own)."""
        self.steps = 0

    async def run(self) -> None:
        """Handle the observations addressed to this agent until it finishes."""
        async with self.connected() as link:
            async for observation in link.observations():
                payload = payload_of(observation.payload)
                if await self.step(render_observation(payload), final=bool(payload.get("done"))):
                    break
        await self.report_outcome()

    async def report_outcome(self) -> None:
        """The episode is over: report its outcome to ReZip (`--rezip`; nothing otherwise)."""
        if self.feedback is not None:
            await self.feedback.report()

    @contextlib.asynccontextmanager
    async def connected(
        self, *, skills: Sequence[str] | None = None, group: str = "", ack_deadline: float | None = None
    ) -> AsyncIterator[Link]:
        """The agent's link for the length of the block, carrying its observations (those addressed to it and
        to `skills`, by default its own; through consumer group `group`, if given) and its writes: one
        session, or unary calls (`transport`)."""
        alone = self.link
        skills = self.skills if skills is None else skills
        async with connect(
            self.client, self.execution_id, self.agent_id, self.transport, skills=skills, group=group,
            ack_deadline=ack_deadline,
        ) as link:  # fmt: skip
            self.link = link
            try:
                yield link
            finally:
                self.link = alone

    async def step(self, observation: str, *, final: bool = False) -> bool:
        """One observation: ask, validate, submit (retrying as the limits allow). True when finished (the
        model said Finish, or this was the final observation)."""
        self.steps += 1
        if self.feedback is not None:
            self.feedback.begin_step(observation)
        await self._summarize_if_asked()
        answered = await self.answer(observation)
        if answered is None:
            return await self._give_up() or final
        return is_finish(answered) or final

    async def answer(self, observation: str) -> Reply | None:
        """Ask the model about `observation` and submit its patch and action, asking again after a malformed
        reply, a refused patch or a lost conflict, as the limits allow. The applied reply, or None when the
        step was given up (or, where `submission` says so, abandoned)."""
        attempts = Attempts(self.limits)
        while not attempts.exhausted:
            attempts.number += 1
            state = await self.read_state()
            prompt = self.context.prompt(self.instructions, self._visible(state.state), attempts.shown(observation))
            schema = self.context.response_schema if self.constrained else None
            completion = await complete(self.model, prompt, response_schema=schema, policy_options=self.policy_options)
            reply = await self._read_reply(completion, attempts)
            if reply is None:
                continue
            submission = self.submission(reply, state)
            if submission is None:
                self._record(completion, attempts.number, "abandoned", action=reply.action)
                return None
            patch, action = submission
            try:
                result = await self.link.submit(patch, base_revision=state.revision, action=action)
            except ConflictError as error:
                self._record(completion, attempts.number, "conflict", action=reply.action, patch=patch,
                             error=error.message, conflict_paths=error.paths)  # fmt: skip
                attempts.conflicts += 1
                continue
            except ValidationError as error:
                self._record(completion, attempts.number, "invalid", action=reply.action, patch=patch,
                             error=error.message)  # fmt: skip
                attempts.refused(error.message)
                continue
            self._record(completion, attempts.number, "applied", action=reply.action, patch=patch,
                         revision=result.revision)  # fmt: skip
            self.context.remember(observation, completion.text)
            return reply
        return None

    async def _read_reply(self, completion: Completion, attempts: Attempts) -> Reply | None:
        """The reply in `completion`, or None to ask again: it asked for a macro's text (`--rezip`, given with
        the next prompt) or broke the format (named in the next prompt)."""
        try:
            if self.feedback is not None and (macro_id := parse_expand(completion.text)) is not None:
                if len(attempts.expanded) >= self.limits.expansions:
                    raise ReplyError(f"no more expansions this step ({len(attempts.expanded)} given): answer "
                                     "with `state_patch` and `action`")  # fmt: skip
                attempts.expanded.append(await self.feedback.expand(macro_id))
                attempts.rejection = None
                self._record(completion, attempts.number, "expand", action=f"expand {macro_id}")
                return None
            return self.context.parse(completion.text)
        except ReplyError as error:
            self._record(completion, attempts.number, "malformed", error=str(error))
            attempts.refused(str(error))
            return None

    def submission(self, reply: Reply, state: State) -> tuple[dict[str, Any], Any] | None:
        """The patch and action to submit for a reply given on `state` (None: submit nothing, abandon)."""
        return (reply.state_patch if self.context.writes_state else {}), reply.action

    async def read_state(self) -> State:
        """Σ as the next attempt sees it: the head, read fresh for every attempt."""
        return await self.client.get_state(self.execution_id)

    def _visible(self, state: Mapping[str, Any]) -> Mapping[str, Any]:
        return state if self.reads is None else {key: state[key] for key in self.reads if key in state}

    def _record(self, completion: Completion, attempt: int, outcome: str, **details: Any) -> None:
        self.recorder.add(
            StepRecord(
                self.agent_id,
                self.context.name,
                self.steps,
                attempt,
                completion.prompt_tokens,
                completion.completion_tokens,
                outcome,
                cached_prompt_tokens=completion.cached_prompt_tokens,
                **details,
            )
        )

    async def _summarize_if_asked(self) -> None:
        request = self.context.summarize_request()
        if request is None:
            return
        completion = await complete(self.model, request, policy_options=self.policy_options)
        self._record(completion, 0, "summary")
        self.context.summarized(completion.text)

    async def _give_up(self) -> bool:
        if self.feedback is not None:
            self.feedback.gave_up()
        revision = (await self.read_state()).revision
        result = await self.link.submit({}, base_revision=revision, action=WAIT)
        self._record(Completion("", 0, 0), 0, "gave_up", action=WAIT, patch={}, revision=result.revision)
        return False


def is_finish(reply: Reply) -> bool:
    """The reply ends the agent's run (its action is `Finish`, however it is cased or followed)."""
    return reply.action.split(" ", 1)[0].capitalize() == FINISH


def payload_of(payload: Any) -> Mapping[str, Any]:
    """An observation's payload as a mapping (a bare value is the event's text)."""
    return payload if isinstance(payload, Mapping) else {"event": str(payload)}
