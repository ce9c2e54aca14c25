"""The working agent's tools: confined to their directory, every command timed, every cut said."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillstate.agents.work.tools import Action, Workdir


async def test_files_are_written_and_read_inside_the_directory_only(tmp_path: Path) -> None:
    work = Workdir(tmp_path / "work")
    (tmp_path / "work").mkdir()
    (tmp_path / "secret").write_text("no")
    (tmp_path / "work" / "link").symlink_to(tmp_path / "secret")
    written = await work.run(Action("write_file", {"path": "pkg/mod.py", "content": "a\nb\nc\n"}))
    assert written.status == "completed" and (tmp_path / "work" / "pkg" / "mod.py").read_text() == "a\nb\nc\n"
    read = await work.run(Action("read_file", {"path": "pkg/mod.py", "offset": 1, "limit": 1}))
    assert (read.status, read.result) == ("completed", "b\n")
    for path in ("../secret", str(tmp_path / "secret"), "link", "pkg/../../secret"):
        refused = await work.run(Action("read_file", {"path": path}))
        assert refused.status == "failed" and "outside the working directory" in refused.result, path
    assert (await work.run(Action("write_file", {"path": "../x", "content": ""}))).status == "failed"
    assert not (tmp_path / "x").exists()


async def test_commands_run_in_the_directory_with_their_exit_code_and_a_time_limit(tmp_path: Path) -> None:
    work = Workdir(tmp_path)
    ran = await work.run(Action("bash", {"command": "pwd; echo oops >&2; exit 3"}))
    assert (ran.status, ran.exit_code) == ("failed", 3) and ran.result == f"{tmp_path.resolve()}\noops\n"
    stopped = await work.run(Action("bash", {"command": "sleep 30 & sleep 30", "timeout_s": 0.3}))
    assert stopped.status == "timeout" and "Stopped after 0.3 s" in stopped.result
    bad = await work.run(Action("bash", {"command": "true", "timeout_s": "soon"}))
    assert bad.status == "failed" and "timeout_s" in bad.result


async def test_a_long_result_is_cut_and_the_record_says_so(tmp_path: Path) -> None:
    work = Workdir(tmp_path, result_limit=100)
    record = await work.run(Action("bash", {"command": "seq 1 1000"}))
    assert record.status == "completed" and len(record.result) == 100 and record.as_json()["truncated"] == 100
    assert "truncated" not in (await work.run(Action("bash", {"command": "echo short"}))).as_json()


async def test_an_unknown_tool_or_a_bad_argument_is_a_failed_record(tmp_path: Path) -> None:
    work = Workdir(tmp_path)
    unknown = await work.run(Action("delete_everything", {}))
    assert unknown.status == "failed" and "unknown tool 'delete_everything'" in unknown.result
    missing = await work.run(Action("write_file", {"path": "a.txt"}))
    assert missing.status == "failed" and "content" in missing.result
    absent = await work.run(Action("read_file", {"path": "nope.txt"}))
    assert absent.status == "failed" and "No such file" in absent.result


async def test_a_child_left_running_is_killed_and_output_so_far_is_kept(tmp_path: Path) -> None:
    """Found in review: `server &` kept the output open, so a command that was done read as a time-out, and
    a time-out dropped what the command had printed."""
    work = Workdir(tmp_path)
    left = await work.run(Action("bash", {"command": "echo $$ > pid; sleep 30 & echo $! > child; echo hi"}))
    assert (left.status, left.result) == ("completed", "hi\n")
    child = int((tmp_path / "child").read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2], "killed"
    slow = await work.run(Action("bash", {"command": "echo partial; sleep 5", "timeout_s": 0.5}))
    assert slow.status == "timeout" and slow.result.endswith("Its output so far:\npartial\n")


async def test_commands_get_no_keys_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLSTATE_API_KEY", "sk-do-not-show")
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-do-not-show")
    monkeypatch.setenv("HARMLESS_SETTING", "shown")
    record = await Workdir(tmp_path).run(Action("bash", {"command": "env"}))
    assert "do-not-show" not in record.result and "HARMLESS_SETTING=shown" in record.result


async def test_output_past_the_limit_is_read_and_thrown_away(tmp_path: Path) -> None:
    record = await Workdir(tmp_path, result_limit=1000).run(Action("bash", {"command": "head -c 50000000 /dev/zero"}))
    assert record.status == "completed" and len(record.result) == 1000 and record.truncated == 1000


async def test_input_no_tool_can_take_is_a_failed_record(tmp_path: Path) -> None:
    """Found in review: each of these raised out of the tools and ended the run."""
    work = Workdir(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    unusable = [Action("read_file", {"path": "a\x00b"}), Action("write_file", {"path": "s.txt", "content": "\ud800"}),
                Action("read_file", {"path": "loop/x"}), Action("bash", {"command": "echo a\x00b"})]  # fmt: skip
    for action in unusable:
        record = await work.run(action)
        assert record.status == "failed", (action, record)
