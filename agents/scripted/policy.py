"""The scripted test policy: a deterministic stand-in for a model, registered as the litellm provider
`skillstate` (`skillstate/scripted`), so that tests and the offline default run with no network and no model.

It is a TEST POLICY, not a model: its scores are never model results. It reads only the prompt it is given
(the state block and the observation as text, or for transcript runtimes the transcript), never the
simulator's ground truth, and answers in the runtime's format with a few sentences of reasoning. What it knows
of the warehouse comes from the text: a state's `inventory`, or in a transcript the results of earlier
actions (`Stored item_3 on shelf_5.`), or a summary's `shelf_5=item_3` pairs. Its memory is imperfect
where a model's is (`recall`, `sim --recall`): it reads a state block exactly, and recalls each fact only a
transcript or a summary gives with probability `recall`, drawn anew at every step; with `recall` 1 it
replays a transcript perfectly. It never guesses: an item it has no record of is not shipped, and a new
item goes on a free shelf chosen at random (seeded by the prompt).

`skillstate/faulty-R` (R a rate, for example `faulty-0.2`) makes, at rate R, the small-model errors the
paper reports: 68% patches that overwrite or delete existing keys, 20% type errors, 12% malformed JSON. The
draw is seeded by the prompt, so a run repeats exactly and a retry (whose prompt names the error) draws anew.
`skillstate/semantic-R` makes, at rate R, errors no validation catches: a schema-valid but wrong patch (the
item recorded one shelf off, or the step's change dropped), which the run reports as state drift.

Faulty agents for concurrent simulations: `skillstate/stalls` never answers (a hung model call),
`skillstate/finishes-early` answers `Finish` to its first event, and `skillstate/corrupts` acts correctly
but records every item it stores one shelf off (a state that is schema-valid and wrong), and in the
stockroom `skillstate/fumbles` misreads its events: a shipment one unit too many, an order shipped from the
next shelf, each recorded as it did it, so that the world refuses it and its record must be taken back. Options the
runtime may pass (`policy_options`): `think_ms`, how long each call takes, as a hosted model's latency
would, `reply_words`, how many words of reasoning each answer gives (`sim --reply-words`), and `recall`
(default 1).

With `--rezip` (its prompt says how to expand a macro) it asks for a macro's full text, deterministically,
when its step needs one its instructions show only in summary: the event names the macro (every word of
its name, but a `step N` suffix), and the macro was not expanded for this step yet (`needed_macro`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..envs.warehouse import SHELVES, shelf_number
from ..protocol.prompts import (
    ACTION_FORMAT,
    EXPAND_HINT,
    EXPANDED_HEADER,
    GIVE_UP,
    OBSERVATION_HEADER,
    STATE_HEADER,
    STATEFUL_FORMAT,
    SUMMARY_REQUEST,
)
from ..protocol.reply import format_expand, format_reply
from .faults import inject_fault, lengthened, semantic_fault, shelf_off, transcript_fault
from .memory import recalled
from .stockroom import STOCK_EVENT, stockroom_answer

PROVIDER = "skillstate"
SCRIPTED = f"{PROVIDER}/scripted"
TOKENIZER_MODEL = "gpt-4o"
"""The tokenizer the test policy's usage is counted with (o200k_base, shipped with litellm)."""
FAULTY_NAMES = ("stalls", "finishes-early", "corrupts", "fumbles")
STALLS, FINISHES_EARLY, CORRUPTS, FUMBLES = (f"{PROVIDER}/{name}" for name in FAULTY_NAMES)
FAULTY_AGENTS = (STALLS, FINISHES_EARLY, CORRUPTS, FUMBLES)

_STATE_BLOCK = re.compile(re.escape(STATE_HEADER) + r"\s*```json\n(.*?)\n```", re.DOTALL)
_TRANSCRIPT = re.compile(
    r"Action: (?P<action>(?:Store|Ship|Move)(?: \w+){2,3})"
    r"|Last action: (?P<failed>[^\n]+)\nStatus: error"
    r"|(?P<summary>shelf_\d+)=(?P<summarized>item_\d+)"
    r"|(?P<alert>Alert: [^\n]+)"
)
_ALERTS: tuple[tuple[re.Pattern[str], Callable[..., dict[str, Any]]], ...] = (
    (re.compile(r"Alert: (item_\d+) was moved from (shelf_\d+) to (shelf_\d+)"),
     lambda item, old, new: {old: None, new: item}),
    (re.compile(r"Alert: an audit found (shelf_\d+) holding (item_\d+) and (shelf_\d+) holding (item_\d+)"),
     lambda x, b, y, a: {x: b, y: a}),
    (re.compile(r"Alert: (item_\d+) on (shelf_\d+) was relabelled (item_\d+)"), lambda old, shelf, new: {shelf: new}),
    (re.compile(r"Alert: the order for (item_\d+) was canceled"), lambda item: {}),
)  # fmt: skip
"""What each warehouse alert (envs/recovery.py) says changed: the inventory patch that records it."""
_MACRO_BLOCK = re.compile(r'\[macro (m-[0-9a-f]+) "([^"\n]*)", \d+ sections?(?:, (?:contract|outline))?; expand it')
"""A macro block shown below full (server/skills/render.py): its id and name."""
_STEP_SUFFIX = re.compile(r",? step \d+$")
_CURRENT_STATE = re.compile(r"Current State:\n(\{.*?\n\})\n\nHistory:", re.DOTALL)
_OCCUPIED = re.compile(r"(shelf_\d+) is occupied by (item_\d+)")


@dataclass
class View:
    """What the prompt tells: the known inventory and the latest observation."""

    inventory: dict[str, str]
    observation: str
    from_state: bool
    notes: list[str] = field(default_factory=list)


def split_prompt(prompt: str) -> tuple[str, str, dict[str, Any] | None]:
    """(what precedes the latest observation, the latest observation, the state block it shows if any)."""
    head, found, observation = prompt.rpartition(OBSERVATION_HEADER)
    if not found:
        head, observation = prompt, ""
    block = _STATE_BLOCK.search(head) or _CURRENT_STATE.search(head)
    return head, observation, None if block is None else json.loads(block.group(1))


def read_prompt(prompt: str, recall: float = 1.0) -> View:
    """What the prompt tells: a state block exactly; what only a transcript or a summary says, each fact
    (shelf -> item) recalled with probability `recall` (`recalled`)."""
    head, observation, state = split_prompt(prompt)
    if state is not None:
        stocked = {k: v for k, v in (state.get("inventory") or {}).items() if isinstance(v, str)}
        return View(stocked, observation, True)
    inventory: dict[str, str] = {}
    for match in _TRANSCRIPT.finditer(head):  # replay the transcript: actions taken, failures taken back
        if match["action"]:
            _apply(match["action"], inventory)
        elif match["failed"] or match["alert"]:
            changes = _undo(match["failed"], inventory) if match["failed"] else _alert(match["alert"])[1]
            inventory.update(changes)
            inventory = {shelf: item for shelf, item in inventory.items() if item is not None}
        else:
            inventory[match["summary"]] = match["summarized"]
    return View(recalled(inventory, prompt, recall), observation, False)


def needed_macro(prompt: str) -> str | None:
    """The macro this step needs in full, if the prompt offers expansion (`--rezip`): the first macro its
    instructions show only in summary whose name the step's event names, not expanded for this step yet."""
    if EXPAND_HINT not in prompt:
        return None
    head, _, observation = prompt.rpartition(OBSERVATION_HEADER)
    event = re.search(r"^Event: (.*)$", observation, re.MULTILINE)
    if event is None:
        return None
    words = set(re.findall(r"[a-z0-9]+", event.group(1).lower()))
    for macro_id, name in _MACRO_BLOCK.findall(head):
        wanted = set(re.findall(r"[a-z0-9]+", _STEP_SUFFIX.sub("", name).lower()))
        if wanted and wanted <= words and f"{EXPANDED_HEADER} {macro_id}:" not in observation:
            return str(macro_id)
    return None


def warehouse_answer(prompt: str, recall: float = 1.0) -> tuple[str, dict[str, Any], str]:
    """(reasoning, state patch, action) for a warehouse prompt."""
    view = read_prompt(prompt, recall)
    patch: dict[str, Any] = {}
    reasoning = []
    last = re.search(r"Last action: (.*)\nStatus: (\w+)\nResult: (.*)", view.observation)
    if last and last.group(2) == "error":
        reasoning.append(f"My last action `{last.group(1)}` failed: {last.group(3)}")
        patch.update(_undo(last.group(1), view.inventory))
        occupied = _OCCUPIED.search(last.group(3))
        if occupied:
            patch[occupied.group(1)] = occupied.group(2)
            reasoning.append(f"So {occupied.group(1)} holds {occupied.group(2)}; I record that.")
    known = {**view.inventory, **{k: v for k, v in patch.items() if v is not None}}
    for shelf in [k for k, v in patch.items() if v is None]:
        known.pop(shelf, None)
    action, effect = _decide(
        view.observation, known, reasoning, random.Random(hashlib.sha256(prompt.encode()).digest())
    )
    patch.update(effect)
    source = "my execution state" if view.from_state else "what the earlier results said"
    reasoning.insert(0, f"I read the latest observation and check {source}, which lists {len(known)} occupied shelves.")
    reasoning.append(f"The state update records the effect of `{action}` so the next step starts from it.")
    return " ".join(reasoning), ({"inventory": patch} if patch else {}), action


def _alert(text: str) -> tuple[bool, dict[str, Any]]:
    """(whether `text` is a warehouse alert, the inventory patch recording what it says changed)."""
    for pattern, changes in _ALERTS:
        found = pattern.search(text)
        if found:
            return True, changes(*found.groups())
    return False, {}


def _decide(
    observation: str, known: dict[str, str], reasoning: list[str], rng: random.Random
) -> tuple[str, dict[str, Any]]:
    if "No more events" in observation:
        reasoning.append("There are no more events, so the work is done.")
        return "Finish", {}
    alerted, changes = _alert(observation)
    if alerted:
        if changes:
            reasoning.append("The alert says the inventory changed outside our actions; I record the change.")
        else:
            reasoning.append("The item was shipped; nothing can bring it back, so I wait.")
        return "Wait", changes
    if arrived := re.search(r"Shipment arrived containing (item_\d+)", observation):
        item = arrived.group(1)
        shelf = _free_shelf(known, rng)
        if shelf is None:
            reasoning.append(f"{item} arrived, but my records show no free shelf, so I wait.")
            return "Wait", {}
        reasoning.append(f"{item} arrived; my records show {shelf} free, so I store it there.")
        return f"Store {item} {shelf}", {shelf: item}
    if ordered := re.search(r"Customer ordered (item_\d+)", observation):
        item = ordered.group(1)
        holder = next((s for s, held in known.items() if held == item), None)
        if holder is None:
            reasoning.append(f"A customer ordered {item}, but I have no record of where it is, so I wait.")
            return "Wait", {}
        reasoning.append(f"A customer ordered {item}; my records put it on {holder}, so I ship it from there.")
        return f"Ship {item} {holder}", {holder: None}
    if broken := re.search(r"Maintenance required on (shelf_\d+)", observation):
        shelf = broken.group(1)
        item = known.get(shelf)
        if item is None:
            reasoning.append(f"{shelf} needs maintenance, but I have no record of what it holds, so I wait.")
            return "Wait", {}
        target = _free_shelf({**known, shelf: item}, rng)
        if target is None:
            reasoning.append(f"{shelf} needs maintenance, but my records show no free shelf to move {item} to.")
            return "Wait", {}
        reasoning.append(f"{shelf} needs maintenance and holds {item}; I move it to {target}, a free shelf.")
        return f"Move {item} {shelf} {target}", {shelf: None, target: item}
    reasoning.append("Nothing in the observation asks for an action, so I wait.")
    return "Wait", {}


def _undo(action: str, inventory: dict[str, str]) -> dict[str, Any]:
    """The patch that takes back what a failed action's own patch recorded."""
    words = action.split()
    if len(words) == 3 and words[0] == "Store" and inventory.get(words[2]) == words[1]:
        return {words[2]: None}
    if len(words) == 3 and words[0] == "Ship" and words[2] not in inventory:
        return {}
    if len(words) == 4 and words[0] == "Move" and inventory.get(words[3]) == words[1]:
        return {words[3]: None, words[2]: words[1]}
    return {}


def _apply(action: str, inventory: dict[str, str]) -> None:
    """What an action does to the inventory if it succeeds."""
    words = action.split()
    if words[0] == "Store" and len(words) == 3:
        inventory[words[2]] = words[1]
    elif words[0] == "Ship" and len(words) == 3:
        inventory.pop(words[2], None)
    elif words[0] == "Move" and len(words) == 4:
        inventory.pop(words[2], None)
        inventory[words[3]] = words[1]


def _free_shelf(known: dict[str, str], rng: random.Random) -> str | None:
    """A shelf `known` does not list, at random (nothing in the skills says which); None when there is none."""
    free = [f"shelf_{n}" for n in range(SHELVES) if f"shelf_{n}" not in known]
    return rng.choice(free) if free else None


_FEATURE = re.compile(r"Feature request #(\d+): add (\S+) on branch (\S+)\.")
_FEATURE_PAIR = re.compile(r"\b(feature-\d+)=(\S+\.py)\b")
_REPO_EVENT = re.compile(r"Feature request #|Pushed to |CI Pipeline|Alert: (?:someone force-pushed|CI re-ran|PR #)")


def repo_answer(prompt: str, recall: float = 1.0) -> tuple[str, dict[str, Any], str]:
    """(reasoning, state patch, action) for a software-repository prompt."""
    head, observation, state = split_prompt(prompt)
    files: dict[str, str] = {}  # branch -> the file its feature adds
    if state is not None:
        for entry in (state.get("features") or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get("branch"), str) and isinstance(entry.get("file"), str):
                files[entry["branch"]] = entry["file"]
    else:
        files.update((branch, file) for _, file, branch in _FEATURE.findall(head))
        files.update(_FEATURE_PAIR.findall(head))
        files = recalled(files, prompt, recall)
    if "No more events" in observation:
        return "There are no more events, so the work is done.", {}, "Finish"
    if request := _FEATURE.search(observation):
        number, file, branch = request.groups()
        return (f"Feature request #{number} asks for {file}; I commit it on {branch} and record the feature so a "
                "later step can recover it.", {"features": {number: {"file": file, "branch": branch}}},
                f"Commit {branch} {file}")  # fmt: skip
    if pushed := re.search(r"Pushed to (\S+) \(commit \w+\); no pull request", observation):
        branch = pushed.group(1)
        return f"{branch} has the commit and no pull request yet, so I open one.", {}, f"CreatePR {branch}"
    if failed := re.search(r"(?:CI Pipeline Failed for|CI re-ran on) PR #(\d+) \((\S+)\)", observation):
        pull, branch = failed.groups()
        number = branch.rpartition("-")[2]
        patch = {"features": {number: {"pr": int(pull), "ci": "failed"}}}
        return f"CI failed on PR #{pull}; I fix it on {branch}.", patch, f"FixCI {branch}"
    if passed := re.search(r"CI Pipeline Passed for PR #(\d+) \((\S+)\)", observation):
        pull, branch = passed.groups()
        number = branch.rpartition("-")[2]
        patch = {"features": {number: {"pr": int(pull), "ci": "passed"}}}
        if state is not None and isinstance(state.get("merged"), int):  # a team's count of merges
            failed = re.search(r"Last action: Merge \S+\nStatus: error", observation)
            patch["merged"] = state["merged"] + (0 if failed else 1)  # a failed merge's count taken back
            if failed and GIVE_UP in observation:
                return "No attempts left: I take back the merge I counted.", {"merged": state["merged"] - 1}, "Wait"
        return f"CI passed on PR #{pull}, so I merge it.", patch, f"Merge {pull}"
    if forced := re.search(r"force-pushed (\S+);", observation):
        branch = forced.group(1)
        if branch not in files:
            return f"{branch} lost its commits, but I have no record of its file, so I wait.", {}, "Wait"
        return (
            f"{branch} lost its commits; my records say it adds {files[branch]}, so I commit it again.",
            {},
            (f"Commit {branch} {files[branch]}"),
        )
    if closed := re.search(r"PR #\d+ \((\S+)\) was closed", observation):
        return f"The pull request of {closed.group(1)} was closed; I open a new one.", {}, f"CreatePR {closed.group(1)}"
    return "Nothing in the observation asks for an action, so I wait.", {}, "Wait"


def answer(model: str, prompt: str, reply_words: int | None = None, recall: float = 1.0) -> str:
    """The scripted reply to a prompt, in the format the prompt asks for: a summary, `Action: <cmd>` (with
    `StateUpdate:` when asked), or the SKILL.state block. `reply_words` sets how many words of reasoning
    come before the answer (None: what the decision itself says, 30-90 words); every runtime gets the same.
    `recall` is the chance that it recalls each fact only a transcript or a summary gives (`recalled`)."""
    rate = fault_rate(model)
    if prompt.startswith(SUMMARY_REQUEST):
        known = read_prompt(prompt, recall).inventory
        pairs = ", ".join(f"{shelf}={known[shelf]}" for shelf in sorted(known, key=shelf_number))
        features = ", ".join(f"{branch}={file}" for _, file, branch in _FEATURE.findall(prompt))
        features += (", " if features else "") + ", ".join(f"{b}={f}" for b, f in _FEATURE_PAIR.findall(prompt))
        return f"Inventory so far: {pairs or 'empty'}." + (f" Features: {features}." if features else "")
    if (needed := needed_macro(prompt)) is not None:
        reasoning = f"This step needs macro {needed}, which my instructions show only in summary: I ask for its text."
        return format_expand(reasoning, needed)
    observation = prompt.rpartition(OBSERVATION_HEADER)[2]
    if STOCK_EVENT.search(observation):
        fumbles = model.rpartition("/")[2] == "fumbles"
        reasoning, patch, action = stockroom_answer(*split_prompt(prompt), recall=recall, fumbles=fumbles)
    else:
        reasoning, patch, action = (repo_answer if _REPO_EVENT.search(observation) else warehouse_answer)(
            prompt, recall
        )
    if reply_words is not None:
        reasoning = lengthened(reasoning, reply_words)
    name = model.rpartition("/")[2]  # litellm hands its provider the model without the provider's prefix
    if name == "finishes-early":
        return format_reply("I believe the work is done.", {}, "Finish")
    if name == "corrupts":
        patch = shelf_off(patch, action)
    stateful, transcript = STATEFUL_FORMAT in prompt, ACTION_FORMAT in prompt or STATEFUL_FORMAT in prompt
    rng = random.Random(hashlib.sha256(prompt.encode()).digest())
    if rate and rng.random() < rate:  # every runtime's replies alike, each in its own format
        if name.startswith("semantic-"):
            patch = semantic_fault(rng, patch, action)
        elif transcript:
            return transcript_fault(rng, reasoning, patch, action, stateful=stateful)
        else:
            return inject_fault(rng, reasoning, patch, action)
    if stateful:
        return f"{reasoning}\nStateUpdate: {json.dumps(patch)}\nAction: {action}"
    if transcript:
        return f"{reasoning}\nAction: {action}"
    return format_reply(reasoning, patch, action)


def fault_rate(model: str) -> float:
    name = model.rpartition("/")[2]
    if name == "scripted" or name in FAULTY_NAMES:
        return 0.0
    for prefix in ("faulty-", "semantic-"):
        if name.startswith(prefix):
            with contextlib.suppress(ValueError):
                rate = float(name.removeprefix(prefix))
                if 0 <= rate <= 1:
                    return rate
    raise ValueError(
        f"unknown test policy {model!r}: use {SCRIPTED}, {PROVIDER}/faulty-R or {PROVIDER}/semantic-R with "
        f"0 <= R <= 1, or one of {', '.join(FAULTY_AGENTS)}"
    )


def register_provider(litellm: Any) -> None:
    """Make litellm answer `skillstate/...` models with `answer` (once). litellm comes from the caller, which
    imports it lazily: it takes seconds and ~200 MB."""
    if any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
        return

    class ScriptedProvider(litellm.CustomLLM):  # type: ignore[misc]
        """litellm's door to the scripted test policy."""

        def completion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            prompt = "\n".join(str(m.get("content") or "") for m in messages)
            options = kwargs.get("optional_params") or {}
            words = options.get("reply_words")
            text = answer(model, prompt, None if words is None else int(words), float(options.get("recall", 1.0)))
            prompt_tokens = litellm.token_counter(model=TOKENIZER_MODEL, messages=messages)
            completion_tokens = litellm.token_counter(model=TOKENIZER_MODEL, text=text)
            return litellm.ModelResponse(
                model=model,
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage=litellm.Usage(
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    total_tokens=prompt_tokens + completion_tokens,
                ),
            )

        async def acompletion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
            options = kwargs.get("optional_params") or {}
            think = float(options.get("think_ms", 0)) / 1000
            if model.rpartition("/")[2] == "stalls":
                await asyncio.Event().wait()  # never answers: cancelled with the run
            if think:
                await asyncio.sleep(think)
            return self.completion(model, messages, **kwargs)

    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": PROVIDER, "custom_handler": ScriptedProvider()},
    ]
