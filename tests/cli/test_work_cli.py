"""`skillstate work`, as a user runs it against an OpenAI-compatible server (a local one, replaying replies)."""

from __future__ import annotations

import json
from pathlib import Path

from ..agents.test_work import said
from ..openai_server import OpenAIServer
from .test_cli import skillstate


async def test_work_does_a_task_and_exits_0_once_the_check_accepts_its_finish(tmp_path: Path) -> None:
    workdir, out = tmp_path / "proj", tmp_path / "out"
    workdir.mkdir()
    with OpenAIServer().running() as model:
        model.script = [said("Write it.", {"plan": ["check"]}, "write_file", path="n.txt", content="42\n"),
                        said("Done.", {"plan": []}, "finish", summary="n.txt holds 42")]  # fmt: skip
        code, out_text, err = await skillstate(
            None, "work", "Put 42 in n.txt.", "--workdir", str(workdir), "--model", "openai/coder",
            "--api-base", model.api_base, "--api-key", "local", "--check", "grep -qx 42 n.txt", "--out", str(out),
        )  # fmt: skip
    assert code == 0, err
    assert "2 steps, 2 model calls" in out_text and "finish accepted" in out_text
    results = json.loads((out / "results.json").read_text())
    assert results["finish_accepted"] and results["check_exit_code"] == 0 and results["final_state"] == {"plan": []}


async def test_work_exits_1_when_a_limit_ends_it_and_2_for_what_it_cannot_run(tmp_path: Path) -> None:
    with OpenAIServer().running() as model:
        model.script = [said("Look.", {}, "bash", command="ls")]
        code, out_text, err = await skillstate(
            None, "work", "Look around.", "--workdir", str(tmp_path), "--model", "openai/coder", "--api-base",
            model.api_base, "--api-key", "local", "--max-steps", "1", "--out", str(tmp_path / "out"),
        )  # fmt: skip
    assert code == 1 and "finish not accepted (max_steps)" in out_text, err
    code, _, err = await skillstate(None, "work", "--workdir", str(tmp_path), "--model", "openai/coder")
    assert code == 2 and "give the task, or --task-file" in err
    code, _, err = await skillstate(None, "work", "x", "--workdir", str(tmp_path / "none"), "--model", "openai/m")
    assert code == 2 and "is not a folder" in err
    code, _, err = await skillstate(None, "work", "x", "--workdir", str(tmp_path), "--model", "skillstate/scripted")
    assert code == 2 and "work needs a model" in err
