"""What the base install runs, and what a command needing an extra says when that extra is missing: which
extra to install, with exit code 2, before anything starts. A missing module is simulated in a subprocess
(`sys.modules[name] = None` makes it unimportable, as an uninstalled one is)."""

from __future__ import annotations

import asyncio
import os
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from skillstate.server.skills import tokens

PROGRAM = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from skillstate.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


async def without(modules: list[str], *args: str, program: str = PROGRAM) -> tuple[int, str, str]:
    """Run `program` (the CLI) with `modules` unimportable; returns (exit code, standard output, standard error)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", program, ",".join(modules), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize(
    ("missing", "args", "extra"),
    [
        (["litellm"], ["demo"], "agents"),
        (["scipy"], ["sim", "warehouse"], "agents"),
        (["matplotlib"], ["demo"], "plots"),
        (["asyncpg"], ["serve", "--db", "postgresql://user@127.0.0.1:1/db"], "postgres"),
        (["prometheus_client"], ["serve", "--db", ":memory:", "--metrics-listen", "127.0.0.1:0"], "metrics"),
        (["litellm", "pydantic"], ["serve", "--db", ":memory:", "--extractor", "openai/gpt-4o-mini"], "agents"),
        (["mcp"], ["mcp"], "mcp"),
        (["starlette"], ["console"], "console"),
        (["uvicorn"], ["serve", "--db", ":memory:", "--console", "127.0.0.1:0"], "console"),
    ],
    ids=["demo", "sim", "plots", "postgres", "metrics", "extractor", "mcp", "console", "serve-console"],
)
async def test_a_command_whose_extra_is_missing_names_it(missing: list[str], args: list[str], extra: str) -> None:
    code, _, err = await without(missing, *args)
    assert code == 2, err
    assert f"pip install 'skillstate[{extra}]'" in err and missing[0] in err


EXTRAS = ["litellm", "pydantic", "scipy", "matplotlib", "asyncpg", "prometheus_client", "mcp", "starlette", "uvicorn"]

SERVE_AND_ANSWER = """
import asyncio, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from skillstate.clients import StateClient
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

async def main():
    running = await start_server(SqliteRevisionLog(sys.argv[2]), "127.0.0.1:0")
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            created = await client.create_execution(initial_state={"n": 0})
            await client.submit_patch(created.execution_id, {"n": 1}, agent_id="a", base_revision=0)
            print((await client.get_state(created.execution_id)).state)
    finally:
        await running.stop()

asyncio.run(main())
"""


async def test_the_base_install_serves_and_answers_without_any_extra(tmp_path: Path) -> None:
    code, out, err = await without(EXTRAS, str(tmp_path / "base.db"), program=SERVE_AND_ANSWER)
    assert code == 0, err
    assert out.strip() == "{'n': 1}"
    code, _, err = await without(EXTRAS, "state", "get", "nothing", "--server", "127.0.0.1:1")
    assert code == 8, err  # the state commands too: unavailable, so it got as far as calling the server


async def test_version_and_log_level() -> None:
    code, out, _ = await without([], "--version")
    assert code == 0 and out.strip() == f"skillstate {version('skillstate')}"
    code, _, err = await without([], "serve", "--log-level", "chatty")
    assert code == 2 and "--log-level: invalid choice" in err


def test_tokens_are_counted_offline_from_the_shipped_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # no network here: the shipped file or nothing
    tokens._encoding.cache_clear()
    assert tokens.count_tokens("hello world, twice over") == 5
    assert "TIKTOKEN_CACHE_DIR" not in os.environ  # not left set for others in the process
