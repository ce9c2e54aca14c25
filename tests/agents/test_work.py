"""`skillstate work`'s loop against a real server, over litellm's HTTP client to a local OpenAI-compatible
server replaying scripted replies: P, Σ and O only in each prompt, the paper's rollback-retry, a finish
the check must accept, and the limits that always end a run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.work.loop import WorkConfig, run_work
from skillstate.clients import StateClient
from skillstate.project_skills import FOLDER

from ..openai_server import OpenAIServer, Reply

SKILL = (FOLDER / "coding" / "SKILL.md").read_text()
SCHEMA = json.loads((FOLDER / "coding" / "state.schema.json").read_text())


def said(reasoning: str, patch: dict[str, Any], name: str, **arguments: Any) -> Reply:
    block = {"state_patch": patch, "action": {"name": name, "input": arguments}, "comment": f"a {name}"}
    return Reply(text=f"{reasoning}\n```json\n{json.dumps(block)}\n```")


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    with OpenAIServer().running() as server:
        monkeypatch.setenv("SKILLSTATE_API_BASE", server.api_base)
        monkeypatch.setenv("SKILLSTATE_API_KEY", "local")
        yield server


def config(workdir: Path, **overrides: Any) -> WorkConfig:
    return WorkConfig(**{"task": "Write hello.py, which prints hi.", "workdir": workdir, "model": "openai/coder",
                         "skill": SKILL, "schema": SCHEMA} | overrides)  # fmt: skip


def prompts(server: OpenAIServer) -> list[str]:
    return [seen.body["messages"][0]["content"] for seen in server.requests]


async def test_a_task_done_step_by_step_with_only_p_sigma_and_o_in_each_prompt(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    workdir = tmp_path / "proj"
    workdir.mkdir()
    model.script = [
        said("SECRET-REASONING-1 I plan first.", {"plan": ["write hello.py", "run it"]}, "write_file",
             path="hello.py", content="print('hi')\n"),
        said("I run it.", {"plan": ["run it"], "done": ["write hello.py"]}, "bash", command="python3 hello.py"),
        said("It printed hi.", {"plan": [], "done": ["write hello.py", "run it"]}, "finish", summary="hi"),
    ]  # fmt: skip
    async with StateClient(server_address) as client:
        result = await run_work(client, config(workdir, check="python3 hello.py | grep -qx hi"), tmp_path / "out")
    assert (result.finish_accepted, result.ended, result.steps, result.model_calls) == (True, "finished", 3, 3)
    assert result.check_exit_code == 0 and (workdir / "hello.py").read_text() == "print('hi')\n"
    assert result.final_state == {"plan": [], "done": ["write hello.py", "run it"]}
    shown = prompts(model)
    assert "No actions yet" in shown[0] and SKILL.strip() in shown[0] and "Write hello.py" in shown[0]
    observed = shown[2].split("Latest Observation:")[1].split("Provide your response")[0]
    assert '"done":["write hello.py"]' in shown[2] and '"hi\\n"' in observed
    assert "write_file" not in observed, "window 1: the latest record only"
    assert not any("SECRET-REASONING" in prompt for prompt in shown[1:]), "reasoning is never sent again"
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["finish_accepted"] and saved["input_tokens"] == result.input_tokens > 0
    assert len((tmp_path / "out" / "steps.jsonl").read_text().splitlines()) == 3


async def test_a_broken_reply_or_a_refused_patch_is_asked_again_with_the_state_untouched(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    model.script = [
        Reply(text="I will just write it, no JSON."),
        said("Plan as a string.", {"plan": "write it"}, "finish", summary="x"),
        said("Now right.", {"notes": "ok"}, "finish", summary="done"),
    ]
    async with StateClient(server_address) as client:
        result = await run_work(client, config(tmp_path), tmp_path / "out")
    assert (result.steps, result.model_calls, result.finish_accepted) == (1, 3, True)
    assert result.final_state == {"notes": "ok"}, "the refused patch changed nothing"
    shown = prompts(model)
    assert "Your last reply was refused: no JSON block" in shown[1]
    assert "the state patch was refused" in shown[2] and "/plan" in shown[2]


async def test_a_failing_check_refuses_the_finish_and_shows_its_output(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    model.script = [
        said("Done, I think.", {}, "finish", summary="done"),
        said("The check wants ok.txt.", {}, "write_file", path="ok.txt", content="ok"),
        said("Now done.", {}, "finish", summary="done"),
    ]
    async with StateClient(server_address) as client:
        result = await run_work(client, config(tmp_path, check="test -f ok.txt || { echo need ok.txt; exit 4; }"),
                                tmp_path / "out")  # fmt: skip
    assert (result.steps, result.finish_accepted, result.check_exit_code) == (3, True, 0)
    refused = prompts(model)[1]
    assert "The finish is refused: the check did not pass" in refused and "need ok.txt" in refused


async def test_the_step_limit_ends_a_run_that_never_finishes(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    model.script = [said("Looking.", {}, "bash", command="ls") for _ in range(3)]
    async with StateClient(server_address) as client:
        result = await run_work(client, config(tmp_path, max_steps=3), tmp_path / "out")
    assert (result.ended, result.finish_accepted, result.steps) == ("max_steps", False, 3)


async def test_a_batch_runs_in_order_and_skips_the_rest_after_a_failure(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    actions = [{"name": "write_file", "input": {"path": "a.txt", "content": "a"}},
               {"name": "bash", "input": {"command": "exit 1"}},
               {"name": "write_file", "input": {"path": "b.txt", "content": "b"}}]  # fmt: skip
    finish = [{"name": "finish", "input": {"summary": "partial"}}]
    model.script = [Reply(text="```json\n" + json.dumps({"state_patch": {}, "actions": batch}) + "\n```")
                    for batch in (actions, finish)]  # fmt: skip
    async with StateClient(server_address) as client:
        result = await run_work(client, config(tmp_path, batch=True, window=3), tmp_path / "out")
    assert result.finish_accepted and (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    step = json.loads((tmp_path / "out" / "steps.jsonl").read_text().splitlines()[0])
    assert [r["status"] for r in step["records"]] == ["completed", "failed", "skipped"]


async def test_a_model_call_that_cannot_succeed_ends_the_run_with_its_reason(
    model: OpenAIServer, server_address: str, tmp_path: Path
) -> None:
    from ..openai_server import CONTEXT_WINDOW

    model.script = [said("Look.", {}, "bash", command="ls"), Reply(status=400, body=CONTEXT_WINDOW)]
    async with StateClient(server_address) as client:
        result = await run_work(client, config(tmp_path), tmp_path / "out")
    assert (result.ended, result.steps, result.finish_accepted) == ("model_failed", 2, False)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "ContextWindowExceededError" in saved["error"] and saved["ended"] == "model_failed"
