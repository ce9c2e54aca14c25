"""How each runtime builds its prompt: SKILL.state from (P, Σ, O) only, and the baselines of the paper's §5.1
with the same instructions, where only context management differs (Appendix A).

| runtime    | prompt                                                               | writes state |
|------------|----------------------------------------------------------------------|--------------|
| skillstate | P, Σ, latest observation                                             | yes          |
| react      | P, every earlier observation and response, latest observation        | no           |
| memory     | P, a model-written summary, the 3 latest turns, latest observation   | no           |
| stateful   | P, Σ, every earlier observation and response, latest observation     | yes          |
| truncated  | the react prompt, oldest turns dropped to fit a token budget         | no           |
| summary    | P, a model-written summary cut to a token budget, latest observation | no           |
| groupchat  | P, the conversation of every agent so far, latest observation        | no           |

`truncated` and `summary` are the paper's budget-matched controls (§5.1, Table 5): their prompts are held to
the SKILL.state prompt budget, so what differs from SKILL.state is how the past is kept, not how much of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..protocol.answers import read_action, read_constrained, read_state_update
from ..protocol.prompts import ACTION_FORMAT, STATEFUL_FORMAT, SUMMARY_REQUEST, skill_state_prompt
from ..protocol.reply import REPLY_SCHEMA, Reply, ReplyError, parse_reply

RUNTIMES = ("skillstate", "react", "memory", "stateful", "truncated", "summary", "groupchat")

MEMORY_WINDOW = 3


@dataclass(frozen=True)
class Turn:
    observation: str
    response: str
    agent: str = ""


class Context(Protocol):
    """A runtime's context management: what the model sees, and how its answer is read."""

    name: str
    writes_state: bool
    response_schema: dict[str, Any] | None
    """The JSON schema of the answer, requested as constrained output where the model supports it."""

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str: ...

    def parse(self, text: str) -> Reply: ...

    def remember(self, observation: str, response: str) -> None:
        """Called once a step is applied, with the observation and the model's whole answer."""

    def summarize_request(self) -> str | None:
        """A prompt the runtime must answer (and pass to `summarized`) before the next step, if any."""

    def summarized(self, text: str) -> None: ...


ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "action": {"type": "string", "minLength": 1}},
    "required": ["reasoning", "action"],
    "additionalProperties": False,
}
"""What `--constrained` asks of a transcript runtime: its reasoning, then its action, as one JSON object."""
STATEFUL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "state_update": {"type": "object"},
        "action": {"type": "string", "minLength": 1},
    },
    "required": ["reasoning", "state_update", "action"],
    "additionalProperties": False,
}


class _ActionAnswer:
    """What most contexts share: an answer ending in `Action: <cmd>`, nothing written to Σ, no summaries."""

    writes_state = False
    response_schema: dict[str, Any] | None = ACTION_SCHEMA

    def parse(self, text: str) -> Reply:
        constrained = read_constrained(text, "action")
        if constrained is not None:
            return Reply({}, str(constrained["action"]))
        return Reply({}, read_action(text))

    def remember(self, observation: str, response: str) -> None:
        pass

    def summarize_request(self) -> str | None:
        return None

    def summarized(self, text: str) -> None:
        pass


class SkillState(_ActionAnswer):
    """SKILL.state: nothing of earlier steps survives but the state."""

    name = "skillstate"
    writes_state = True
    response_schema: dict[str, Any] | None = REPLY_SCHEMA

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        return skill_state_prompt(instructions, state, observation)

    def parse(self, text: str) -> Reply:
        return parse_reply(text)


@dataclass
class React(_ActionAnswer):
    """Appendix A.1: the whole transcript, every step."""

    name: str = "react"
    turns: list[Turn] = field(default_factory=list)

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        history = "".join(f"Observation: {t.observation}\nReasoning & Action: {t.response}\n" for t in self.turns)
        return (
            f"Instructions:\n{instructions.strip()}\n\nHistory:\n{history}\n"
            f"Latest Observation:\n{observation.strip()}\n\n{ACTION_FORMAT}"
        )

    def remember(self, observation: str, response: str) -> None:
        self.turns.append(Turn(observation, response))


@dataclass
class Truncated(React):
    """The react transcript cut from its oldest turn until the prompt fits `budget_tokens`."""

    name: str = "truncated"
    budget_tokens: int = 2000
    count_tokens: Any = None
    """text -> tokens (the runtime's tokenizer)"""

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        text = super().prompt(instructions, state, observation)
        while self.turns and self.count_tokens(text) > self.budget_tokens:
            self.turns.pop(0)
            text = super().prompt(instructions, state, observation)
        return text


@dataclass
class Memory(_ActionAnswer):
    """Appendix A.2: a rolling window of the 3 latest turns and a summary of the older ones, which the model
    itself writes (one extra call each time a turn leaves the window; its tokens are counted)."""

    name: str = "memory"
    summary: str = ""
    recent: list[Turn] = field(default_factory=list)
    _leaving: Turn | None = None

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        recent = "".join(f"Observation: {t.observation}\nResponse: {t.response}\n" for t in self.recent)
        return (
            f"Instructions:\n{instructions.strip()}\n\nSummarized History:\n{self.summary or '(none yet)'}\n\n"
            f"Recent History:\n{recent}\nLatest Observation:\n{observation.strip()}\n\n{ACTION_FORMAT}"
        )

    def remember(self, observation: str, response: str) -> None:
        self.recent.append(Turn(observation, response))
        if len(self.recent) > MEMORY_WINDOW:
            self._leaving = self.recent.pop(0)

    def summarize_request(self) -> str | None:
        if self._leaving is None:
            return None
        return (
            f"{SUMMARY_REQUEST}: fold the turn below into the summary, keeping every fact still needed.\n\n"
            f"Summary so far:\n{self.summary or '(none yet)'}\n\n"
            f"Turn:\nObservation: {self._leaving.observation}\nResponse: {self._leaving.response}\n"
        )

    def summarized(self, text: str) -> None:
        self.summary, self._leaving = text.strip(), None


@dataclass
class Stateful(React):
    """Appendix A.3 (LangGraph-style): a state block and the whole transcript."""

    name: str = "stateful"
    writes_state = True
    response_schema: dict[str, Any] | None = field(default_factory=lambda: STATEFUL_SCHEMA)

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        history = "".join(f"Observation: {t.observation}\nResponse: {t.response}\n" for t in self.turns)
        return (
            f"Instructions:\n{instructions.strip()}\n\n"
            f"Current State:\n{json.dumps(state, indent=2, sort_keys=True)}\n\nHistory:\n{history}\n"
            f"Latest Observation:\n{observation.strip()}\n\n{STATEFUL_FORMAT}"
        )

    def parse(self, text: str) -> Reply:
        """The answer's `StateUpdate:` (none: an empty patch, the model chose not to update) and its action.

        An update is the JSON object that follows `StateUpdate:`, on one line or pretty-printed over many,
        fenced (```json or ```) or not, with anything after it; the marker may be in emphasis
        (`**StateUpdate:**`), spaced (`State Update:`), labelled (`StateUpdate (JSON):`) or a JSON key. Only
        emphasis, a fence opener or a backtick may stand between the marker and the object, which is read by a
        JSON decoder from its `{` to its matching `}`. `StateUpdate: none` (or `null`, `no change`) says there
        is nothing to update. Anything else after a marker raises ReplyError, so the runtime counts it
        `malformed` and asks again: an update is never dropped in silence. Several updates are applied in
        order, as one patch."""
        constrained = read_constrained(text, "state_update", "action")
        if constrained is not None:
            if not isinstance(constrained["state_update"], dict):
                raise ReplyError("`state_update` must be a JSON object")
            return Reply(constrained["state_update"], str(constrained["action"]))
        return Reply(read_state_update(text), read_action(text))


@dataclass
class SummaryCapped(_ActionAnswer):
    """The summary-capped control of the paper's Table 5 (§5.1: "strictly enforces a hard token ceiling on the
    natural language summary"), pinned to the SKILL.state prompt budget: the prompt is P, a running summary of
    every earlier turn, and the latest observation; no turn is kept verbatim.

    The model writes the summary: after every applied step the runtime asks it (`summarize_request`, one extra
    call whose tokens are counted) to fold that turn into the summary so far, in at most N tokens, N being what
    the budget left for the summary in the step's prompt (`budget_tokens` minus P, the latest observation and
    the format, by `count_tokens`). The ceiling is hard, as a generation cap is: what the model writes past N
    tokens is cut off (at a word boundary) before it is kept, and each prompt cuts the kept summary again from
    its end until the whole prompt fits `budget_tokens`, whatever the new observation's length. Only when P and
    the observation alone exceed the budget does the prompt pass it, with an empty summary (`truncated` has
    the same floor)."""

    budget_tokens: int
    """The prompt budget: the largest SKILL.state prompt of the same run, as for `truncated`."""
    count_tokens: Callable[[str], int]
    """text -> tokens (the runtime's tokenizer)"""
    name: str = "summary"
    summary: str = ""
    _pending: Turn | None = None
    _room: int | None = None
    """Tokens the latest prompt left for the summary (None before the first prompt: the whole budget)."""

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        def render(summary: str) -> str:
            return (
                f"Instructions:\n{instructions.strip()}\n\nSummarized History:\n{summary}\n\n"
                f"Latest Observation:\n{observation.strip()}\n\n{ACTION_FORMAT}"
            )

        def fits(summary: str) -> bool:
            return self.count_tokens(render(summary)) <= self.budget_tokens

        self._room = max(0, self.budget_tokens - self.count_tokens(render("")))
        return render(_longest_prefix(self.summary or "(none yet)", fits))

    def remember(self, observation: str, response: str) -> None:
        self._pending = Turn(observation, response)

    def summarize_request(self) -> str | None:
        if self._pending is None:
            return None
        room = self._ceiling()
        return (
            f"{SUMMARY_REQUEST}: fold the turn below into the summary, keeping every fact still needed, in at most "
            f"{room} tokens (anything longer is cut off).\n\n"
            f"Summary so far:\n{self.summary or '(none yet)'}\n\n"
            f"Turn:\nObservation: {self._pending.observation}\nResponse: {self._pending.response}\n"
        )

    def summarized(self, text: str) -> None:
        room = self._ceiling()
        self.summary = _longest_prefix(text.strip(), lambda s: self.count_tokens(s) <= room)
        self._pending = None

    def _ceiling(self) -> int:
        return self.budget_tokens if self._room is None else self._room


@dataclass
class GroupChat(_ActionAnswer):
    """A transcript-sharing group chat, as multi-agent frameworks run one: every agent sees the whole shared
    conversation (every agent's observations and answers, reasoning included)."""

    agent: str
    conversation: list[Turn]
    """Shared by every agent of the chat."""
    name: str = "groupchat"

    def prompt(self, instructions: str, state: Mapping[str, Any], observation: str) -> str:
        history = "".join(
            f"[{t.agent}] Observation: {t.observation}\n"
            + (f"[{t.agent}] Reasoning & Action: {t.response}\n" if t.response else "")  # a tool result: no answer
            for t in self.conversation
        )
        return (
            f"Instructions:\n{instructions.strip()}\n\nYou are {self.agent} in a group chat with the other agents.\n\n"
            f"Conversation:\n{history}\nLatest Observation:\n{observation.strip()}\n\n{ACTION_FORMAT}"
        )

    def remember(self, observation: str, response: str) -> None:
        self.conversation.append(Turn(observation, response, self.agent))


def _longest_prefix(text: str, fits: Callable[[str], bool]) -> str:
    """The longest prefix of `text` ending at a word's end that `fits` (the empty string when none does);
    `fits` is taken to be monotone, as token counts of prefixes are."""
    if fits(text):
        return text
    ends = [word.end() for word in re.finditer(r"\S+", text)]
    kept, too_many = 0, len(ends)  # words: `kept` fit (0 is taken to), `too_many` do not
    while too_many - kept > 1:
        middle = (kept + too_many) // 2
        if fits(text[: ends[middle - 1]]):
            kept = middle
        else:
            too_many = middle
    return text[: ends[kept - 1]] if kept else ""
