"""The paper's runtime on a real task (`skillstate work`): one agent, a working directory, a model.

Each step the model sees P (the skill and the task), Σ (the execution's state on the server) and O (the
last `window` action records), nothing else; its reasoning is never stored or sent again. Its reply's patch
goes to the server, which validates it against the execution's schema; a reply that breaks the format, or a
patch the schema refuses, is asked again with the error and Σ untouched, at most `invalid_retries` times
(the paper's rollback-retry). Then its actions run in the directory, in order; after one fails, the rest of
the reply is `skipped`. A `finish` ends the run, once `check` (when given) exits 0 in the directory; a
failing check refuses it and its output is the next observation. `max_steps` and `timeout_s` always end
the run. `results.json` is kept current as steps complete; `steps.jsonl` has a line per step.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillstate.clients import ConflictError, StateClient, ValidationError

from ..protocol.prompts import OBSERVATION_HEADER, STATE_HEADER
from ..protocol.reply import ReplyError
from ..runtime.llm import ModelCallError, complete
from .reply import WorkReply, parse_work_reply
from .tools import Action, ActionRecord, Workdir

AGENT_ID = "worker"
CHECK_TIMEOUT = 600.0
"""Seconds `check` may run."""
PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object"}
"""The execution's schema when the skill brings none."""

_ASKED = """Provide your response with:
1. Step-by-step reasoning (will be discarded after execution)
2. A JSON block fenced with ```json ... ``` with exactly these keys:
"state_patch": <dict: your state updates, set keys to null to delete>,
"""
_TOOLS = """Tools: bash {"command", "timeout_s"}, read_file {"path", "offset", "limit"}, write_file {"path", "content"},
finish {"summary"}. Paths are inside the working directory."""
FORMAT = (
    _ASKED + '"action": {"name": "<bash | read_file | write_file | finish>", "input": {<its arguments>}},\n'
    '"comment": "<string: why, in a few words>"\n' + _TOOLS
)
BATCH_FORMAT = (
    _ASKED + '"actions": [{"name": "<bash | read_file | write_file | finish>", "input": {...}, '
    '"comment": "..."}, ...]\n'
    "(run in order; after one fails, the rest are skipped)\n" + _TOOLS
)


@dataclass(frozen=True)
class WorkConfig:
    task: str
    workdir: Path
    model: str
    skill: str
    """The skill's instructions (its SKILL.md)."""
    schema: dict[str, Any] = field(default_factory=lambda: dict(PERMISSIVE_SCHEMA))
    window: int = 1
    batch: bool = False
    check: str | None = None
    max_steps: int = 50
    timeout_s: float = 1800.0
    invalid_retries: int = 3

    def __post_init__(self) -> None:
        if self.window < 1 or self.max_steps < 1 or self.timeout_s <= 0 or self.invalid_retries < 0:
            raise ValueError("window and max_steps must be at least 1, timeout_s above 0")


@dataclass
class WorkResult:
    model: str
    steps: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    finish_accepted: bool = False
    check_exit_code: int | None = None
    ended: str = ""
    """`finished`, `max_steps`, `timeout`, `no_valid_reply` (every reply of a step refused), `model_failed`
    (a model call retrying could not fix: `error` says which), or `error` (anything else, raised too)."""
    error: str | None = None
    final_state: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def work_prompt(config: WorkConfig, state: dict[str, Any], observation: str) -> str:
    """P (the skill and the task), Σ and O, nothing else."""
    return (
        f"Instructions:\n{config.skill.strip()}\n\nTask:\n{config.task.strip()}\n\n"
        f"{STATE_HEADER}\n```json\n{json.dumps(state, separators=(',', ':'), sort_keys=True)}\n```\n\n"
        f"{OBSERVATION_HEADER}\n{observation.strip()}\n\n{BATCH_FORMAT if config.batch else FORMAT}"
    )


def render_records(records: collections.abc.Iterable[ActionRecord]) -> str:
    shown = [record.as_json() for record in records]
    return json.dumps(shown, indent=1, ensure_ascii=False) if shown else "No actions yet: this is the first step."


async def run_work(
    client: StateClient, config: WorkConfig, out: Path, *, on_step: Callable[[WorkResult], None] | None = None
) -> WorkResult:
    """Work on the task until a finish is accepted or a limit ends the run; results under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "steps.jsonl").write_text("", encoding="utf-8")
    started = time.monotonic()
    result = WorkResult(config.model)
    workdir = Workdir(config.workdir)
    execution_id = (await client.create_execution(schema=config.schema, initial_state={})).execution_id
    records: collections.deque[ActionRecord] = collections.deque(maxlen=config.window)
    while not result.ended:
        if result.steps >= config.max_steps:
            result.ended = "max_steps"
        elif time.monotonic() - started > config.timeout_s:
            result.ended = "timeout"
        else:
            try:
                async with asyncio.timeout(config.timeout_s - (time.monotonic() - started)):
                    await _step(client, execution_id, config, workdir, records, result, out / "steps.jsonl")
            except TimeoutError:
                result.ended = "timeout"
            except BaseException as error:
                result.ended, result.error = "error", f"{type(error).__name__}: {error}"
                _write(out, result, started)
                raise
        result.final_state = (await client.get_state(execution_id)).state
        _write(out, result, started)
        if on_step is not None:
            on_step(result)
    return result


async def _step(
    client: StateClient,
    execution_id: str,
    config: WorkConfig,
    workdir: Workdir,
    records: collections.deque[ActionRecord],
    result: WorkResult,
    steps_file: Path,
) -> None:
    """One step: the model asked (again while its replies are refused), then its actions run."""
    result.steps += 1
    sizes: dict[str, int] = {}
    try:
        reply = await _ask(client, execution_id, config, render_records(records), result, sizes)
    except ModelCallError as error:
        result.ended, result.error = "model_failed", str(error)
        reply = None
    if reply is None:
        result.ended = result.ended or "no_valid_reply"
        _append(steps_file, {"step": result.steps, **sizes, "records": [], "ended": result.ended})
        return
    done = await _act(workdir, config, reply, result)
    records.extend(done)
    _append(steps_file, {"step": result.steps, **sizes, "records": [record.as_json() for record in done]})


async def _ask(
    client: StateClient,
    execution_id: str,
    config: WorkConfig,
    observation: str,
    result: WorkResult,
    sizes: dict[str, int],
) -> WorkReply | None:
    """The step's reply, its patch committed; None when every reply was refused. `sizes` gets the prompt and
    reply sizes of its attempts, summed."""
    refusal = ""
    for _ in range(config.invalid_retries + 1):
        state = await client.get_state(execution_id)
        shown = observation + (f"\n\nYour last reply was refused: {refusal} Answer again." if refusal else "")
        prompt = work_prompt(config, state.state, shown)
        completion = await complete(config.model, prompt)
        result.model_calls += 1
        result.input_tokens += completion.prompt_tokens
        result.output_tokens += completion.completion_tokens
        result.cached_input_tokens += completion.cached_prompt_tokens
        for name, value in (("prompt_chars", len(prompt)), ("reply_chars", len(completion.text)),
                            ("prompt_tokens", completion.prompt_tokens),
                            ("completion_tokens", completion.completion_tokens), ("attempts", 1)):  # fmt: skip
            sizes[name] = sizes.get(name, 0) + value
        try:
            reply = parse_work_reply(completion.text, batch=config.batch)
            if reply.state_patch:
                await client.submit_patch(execution_id, reply.state_patch, agent_id=AGENT_ID,
                                          base_revision=state.revision)  # fmt: skip
        except ReplyError as error:
            refusal = str(error)
        except (ValidationError, ConflictError) as error:
            refusal = f"the state patch was refused: {error.message}"
        else:
            return reply
    return None


async def _act(workdir: Workdir, config: WorkConfig, reply: WorkReply, result: WorkResult) -> list[ActionRecord]:
    """Run the reply's actions in order: after a failure the rest are skipped; a finish ends the run if the
    check passes."""
    done: list[ActionRecord] = []
    for action in reply.actions:
        if result.finish_accepted:
            done.append(ActionRecord(action, "skipped", "Not run: the finish before it was accepted."))
            continue
        if done and done[-1].status != "completed":
            done.append(ActionRecord(action, "skipped", "Not run: an earlier action of this reply did not complete."))
            continue
        record = await (_finish(workdir, config, action, result) if action.name == "finish" else workdir.run(action))
        done.append(record)
    if result.finish_accepted:
        result.ended = "finished"
    return done


async def _finish(workdir: Workdir, config: WorkConfig, action: Action, result: WorkResult) -> ActionRecord:
    if config.check is None:
        result.finish_accepted = True
        return await workdir.run(action)
    checked = await workdir.run(Action("bash", {"command": config.check, "timeout_s": CHECK_TIMEOUT}))
    result.check_exit_code = checked.exit_code
    if checked.status == "completed":
        result.finish_accepted = True
        return ActionRecord(action, "completed", f"The check passed.\n{checked.result}", checked.truncated, 0)
    return ActionRecord(action, "failed", f"The finish is refused: the check did not pass.\n{checked.result}",
                        checked.truncated, checked.exit_code)  # fmt: skip


def _write(out: Path, result: WorkResult, started: float) -> None:
    result.wall_s = round(time.monotonic() - started, 2)
    (out / "results.json").write_text(json.dumps(asdict(result), indent=2) + "\n", encoding="utf-8")


def _append(path: Path, line: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line, sort_keys=True) + "\n")
