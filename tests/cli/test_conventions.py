"""What operators expect of the command: an example in every --help that parses, -o json|table|yaml, connection
flags before or after the subcommand, shell completion, and `serve` settings from flags, the environment and
a TOML file."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from skillstate.cli.common import UsageError
from skillstate.cli.main import build_parser, parse
from skillstate.server.rpc.app import RunningServer

from .test_cli import skillstate


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from every_parser(child)


PARSERS = {p.prog: p for p in every_parser(build_parser()[0])}


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_help_has_an_example_that_parses(prog: str) -> None:
    text = PARSERS[prog].format_help()
    assert "\nexample:\n" in text, f"`{prog} --help` shows no example"
    examples = text.split("\nexample:\n", 1)[1].strip().splitlines()
    assert examples
    for line in examples:
        inner = re.search(r"\$\((skillstate [^)]*)\)", line)  # eval "$(skillstate ...)"
        words = shlex.split(inner.group(1) if inner else line, comments=True)
        while "=" in words[0]:  # NAME=value before the command
            words.pop(0)
        assert words[0] == "skillstate", line
        build_parser()[0].parse_args(words[1:])  # SystemExit (a failure here) if the example is wrong


async def test_output_formats(server: RunningServer) -> None:
    state = {"order": {"id": 7, "lines": ["a", "b"]}, "note": "x" * 100}
    assert (await skillstate(server, "state", "create", "ex-1", "--state", json.dumps(state)))[0] == 0
    await skillstate(server, "state", "create", "ex-22")
    code, out, _ = await skillstate(server, "state", "get", "ex-1", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["state"] == state
    as_json = json.loads((await skillstate(server, "state", "get", "ex-1"))[1])
    assert yaml.safe_load(out) == as_json

    code, out, _ = await skillstate(server, "state", "list", "-o", "table")
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["EXECUTION_ID", "HEAD_REVISION", "CREATE_TIME", "UPDATE_TIME", "AGENTS"]
    assert [row.split()[:2] for row in rows] == [["ex-1", "0"], ["ex-22", "0"]]
    assert rows[0].index("0") == rows[1].index("0") == header.index("HEAD_REVISION")  # aligned

    code, out, _ = await skillstate(server, "state", "get", "ex-1", "-o", "table")
    fields = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in out.splitlines()[1:]}
    assert fields["revision"] == "0" and fields["state"].endswith("…") and len(fields["state"]) == 60

    code, out, _ = await skillstate(server, "state", "list", "--prefix", "ex-2", "-o", "yaml")
    assert [d["execution_id"] for d in yaml.safe_load_all(out)] == ["ex-22"]
    code, _, err = await skillstate(server, "state", "list", "-o", "xml")
    assert code == 2 and "invalid choice: 'xml'" in err


async def test_connection_flags_go_before_or_after_the_subcommand(server: RunningServer) -> None:
    here = f"127.0.0.1:{server.port}"
    assert (await skillstate(None, "--server", here, "state", "create", "flags"))[0] == 0
    code, out, _ = await skillstate(None, "--server", "127.0.0.1:1", "state", "get", "flags", "--server", here)
    assert code == 0 and json.loads(out)["revision"] == 0  # the flag after the subcommand wins
    code, _, err = await skillstate(None, "--server", "127.0.0.1:1", "state", "get", "flags")
    assert code == 8  # the one before it was used: nothing listens there
    code, _, err = await skillstate(None, "--token", "t", "serve", "--db", ":memory:")
    assert code == 2 and "--token does not apply to `skillstate serve`" in err


def test_the_server_comes_from_the_environment_unless_a_flag_names_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLSTATE_SERVER", "10.1.2.3:5")
    monkeypatch.setenv("SKILLSTATE_TOKEN", "from-env")
    args = parse(["state", "get", "x"])
    assert (args.server, args.token) == ("10.1.2.3:5", "from-env")
    assert parse(["--server", "h:1", "state", "get", "x", "--token", "t"]).server == "h:1"
    assert parse(["state", "get", "x", "--token", "t"]).token == "t"
    monkeypatch.delenv("SKILLSTATE_SERVER")
    assert parse(["skills", "list"]).server == "127.0.0.1:50051"


def test_serve_settings_flags_over_environment_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "serve.toml"
    config.write_text('seats = 8\nmax-in-flight = 100\nlog-level = "warning"\ninsecure-no-auth = true\ndb = "f.db"\n')
    monkeypatch.setenv("SKILLSTATE_MAX_IN_FLIGHT", "200")
    monkeypatch.setenv("SKILLSTATE_DB", "env.db")
    args = parse(["serve", "--config", str(config), "--db", "flag.db"])
    assert (args.seats, args.max_in_flight, args.db) == (8, 200, "flag.db")
    assert (args.log_level, args.insecure_no_auth, args.max_watchers) == ("WARNING", True, 1024)
    monkeypatch.setenv("SKILLSTATE_CONFIG", str(config))
    monkeypatch.setenv("SKILLSTATE_INSECURE_NO_AUTH", "no")
    args = parse(["serve"])
    assert (args.seats, args.db, args.insecure_no_auth) == (8, "env.db", False)


@pytest.mark.parametrize(
    ("toml", "environment", "message"),
    [
        ("seets = 8", {}, "serve.toml: unknown setting 'seets'"),
        ("seats = 'many'", {}, "serve.toml: seats: invalid int value: 'many'"),
        ("insecure-no-auth = 'yes'", {}, "serve.toml: insecure-no-auth: expected true or false"),
        ("log-level = 'chatty'", {}, "serve.toml: log-level: 'chatty' is not one of DEBUG"),
        ("seats = [", {}, "is not valid TOML"),
        ("", {"SKILLSTATE_SEATS": "8.5"}, "SKILLSTATE_SEATS: invalid int value: '8.5'"),
        ("", {"SKILLSTATE_INSECURE_NO_AUTH": "maybe"}, "SKILLSTATE_INSECURE_NO_AUTH: expected one of 1, true"),
    ],
)
def test_bad_settings_name_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, environment: dict[str, str], message: str
) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(toml)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=re.escape(message)):
        parse(["serve", "--config", str(config)])


async def test_serve_runs_with_its_settings_file_and_logs_json(tmp_path: Path) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(f'db = "{tmp_path / "s.db"}"\nlisten = "127.0.0.1:0"\nlog-format = "json"\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillstate.cli", "serve", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout and process.stderr
    try:
        banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert "skillstate serving on 127.0.0.1:" in banner and "s.db" in banner
        record = json.loads(await asyncio.wait_for(process.stderr.readline(), 30))
        assert set(record) == {"time", "level", "logger", "message"} and record["level"] in ("INFO", "WARNING")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", record["time"])
    finally:
        process.terminate()
        await process.wait()


def test_completion_offers_the_parsers_own_words(tmp_path: Path) -> None:
    def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        environment = {"_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
                       "_ARGCOMPLETE_STDOUT_FILENAME": str(out), "_ARGCOMPLETE_IFS": "\n",
                       "PATH": "/usr/bin:/bin"}  # fmt: skip
        subprocess.run([sys.executable, "-m", "skillstate.cli"], env=environment, check=True, timeout=60)
        return sorted(out.read_text().split())

    assert complete("skillstate sta") == ["state"]
    assert {"list", "delete", "watch"} <= set(complete("skillstate state "))
    assert complete("skillstate state list -o ") == ["json", "table", "yaml"]
    assert "--log-format" in complete("skillstate serve --log-f")


def test_completion_script_registers_in_bash() -> None:
    script = subprocess.run(
        [sys.executable, "-m", "skillstate.cli", "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    registered = subprocess.run(
        ["bash", "-c", f"{script}\ncomplete -p skillstate"], capture_output=True, text=True, check=True
    ).stdout
    assert "skillstate" in registered and "-F" in registered
