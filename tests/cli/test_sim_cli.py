"""`skillstate demo` and `skillstate sim`, as a user runs them (their own server, the scripted test policy)."""

from __future__ import annotations

import json
from pathlib import Path

from skillstate.server.rpc.app import RunningServer

from ..agents.test_team_rezip import evidence, register_library
from ..openai_server import OpenAIServer
from .test_cli import skillstate


async def test_the_demo_prints_table_1_with_one_agent_then_a_team_and_writes_their_results(tmp_path: Path) -> None:
    code, out, err = await skillstate(None, "demo", "--out", str(tmp_path))
    assert code == 0, err
    runtimes = ["skillstate", "react", "memory", "stateful", "truncated", "summary", "groupchat"]
    alone, together = out.split("A team: three single-skill agents")
    assert "Table 1 as the paper ran it: one agent runs the three skills" in alone
    for text, agents, folder in ((alone, 1, tmp_path), (together, 3, tmp_path / "team")):
        rows = {line.split("|")[2].strip(): line.split("|") for line in text.splitlines() if line.startswith("| 100 |")}
        assert list(rows) == runtimes
        results = json.loads((folder / "results.json").read_text())
        by_runtime = {run["runtime"]: run for run in results["runs"]}
        assert {run["agents"] for run in results["runs"]} == {agents}
        ours, stateful = by_runtime["skillstate"], by_runtime["stateful"]
        assert ours["score"] == 1.0 and ours["handled"] == 100
        assert stateful["total_tokens"] > 3 * ours["total_tokens"], "the transcript grows, Σ does not"
        assert (folder / "tokens.png").read_bytes().startswith(b"\x89PNG")
        steps = (folder / "steps.jsonl").read_text().splitlines()
        assert len(steps) >= 6 * 100 and all(json.loads(line)["prompt_tokens"] >= 0 for line in steps)
    shared = {runtime: row[3].strip() for runtime, row in rows.items()}  # the team's table says what agents share
    assert (shared["skillstate"], shared["groupchat"]) == ("one shared state", "one shared transcript")
    assert shared["react"].startswith("nothing: each agent its own transcript")
    assert by_runtime["groupchat"]["total_tokens"] > 5 * ours["total_tokens"]
    assert "TEST POLICY" in out and "not how a model performs" in out
    progress = [line for line in err.splitlines() if "/100 events" in line or "/40 events" in line]
    assert len(progress) == 2 * len(runtimes) + 2, "off a terminal, one line per run: 7 runtimes twice, 2 at once"
    at_once = {run["runtime"]: run for run in json.loads((tmp_path / "at-once" / "results.json").read_text())["runs"]}
    ours, chat = at_once["skillstate"], at_once["groupchat"]
    assert (ours["agents_per_skill"], ours["events"], ours["duplicate_actions"], ours["state_drift"]) == (3, 40, 0, [])
    assert ours["handled_on_time"] > chat["handled_on_time"], "agents at once keep up; agents taking turns fall behind"
    assert chat["tokens_per_handled_event"] > 3 * ours["tokens_per_handled_event"]
    assert "Agents at once: 3 a skill" in out and (tmp_path / "at-once" / "coordination.png").exists()


async def test_sim_runs_one_runtime_against_a_running_server(server: RunningServer, tmp_path: Path) -> None:
    code, out, err = await skillstate(
        server, "sim", "warehouse", "--agents", "1", "--horizon", "12", "--runtime", "stateful", "--noise", "5",
        "--seed", "3", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    run = json.loads((tmp_path / "results.json").read_text())["runs"][0]
    assert (run["runtime"], run["agents"], run["horizon"], run["noise"], run["seed"]) == ("stateful", 1, 12, 5, 3)
    assert "| 12 | stateful |" in out


async def test_sim_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    code, _, err = await skillstate(None, "sim", "warehouse", "--agents", "2", "--out", str(tmp_path))
    assert code == 2 and "agents: the warehouse runs 1 or 3 agents, not 2" in err
    code, _, err = await skillstate(None, "sim", "warehouse", "--model", "skillstate/clever", "--out", str(tmp_path))
    assert code == 2 and "unknown test policy 'skillstate/clever'" in err


async def test_a_model_that_cannot_be_called_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    code, _, err = await skillstate(
        None, "sim", "warehouse", "--horizon", "2", "--model", "no-such-provider/model", "--out", str(tmp_path)
    )
    assert code == 1 and "the skillstate run (T=2, seed 0, 3 agents) failed" in err and "no-such-provider" in err
    assert "Traceback" not in err


async def test_sim_against_a_server_that_requires_credentials(db_path: Path, tmp_path: Path) -> None:
    from skillstate.server.auth.credentials import issue
    from skillstate.server.auth.guard import Mode
    from skillstate.server.rpc.app import start_server
    from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
    from skillstate.server.storage.records import Right
    from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

    store = SqliteCredentialStore(db_path)
    server = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", credentials=store, auth=Mode.REQUIRED)
    try:
        rights = {Right.ADMIN, Right.PUBLISH, Right.READ, Right.REGISTRY}
        tokens = {"environment": (await issue(store, "warehouse", ["*"], rights=rights)).token}
        tokens["warehouse"] = (await issue(store, "warehouse", ["*"], ["warehouse-receiving", "warehouse-shipping",
                                                                      "warehouse-maintenance"])).token  # fmt: skip
        (tmp_path / "tokens.json").write_text(json.dumps(tokens))
        args = ("sim", "warehouse", "--agents", "1", "--horizon", "6", "--out", str(tmp_path))
        code, _, err = await skillstate(server, *args)
        assert code == 11 and "UNAUTHENTICATED" in err
        code, out, err = await skillstate(server, *args, "--tokens", str(tmp_path / "tokens.json"))
        assert code == 0, err
        assert "| 6 | skillstate | 1.00 |" in out
    finally:
        await server.stop(grace=0)


async def test_agents_at_once_each_in_its_own_process_with_its_own_token(db_path: Path, tmp_path: Path) -> None:
    """--processes on a server that requires credentials: every agent calls as itself, from a process of its
    own (nothing shared in memory), with a token written beforehand for its id `{skill}-{i}`; with --rezip it
    hydrates its P, expands and reports its outcome as itself too."""
    from skillstate.server.auth.credentials import issue
    from skillstate.server.auth.guard import Mode
    from skillstate.server.rpc.app import start_server
    from skillstate.server.storage.credential_store.sqlite import SqliteCredentialStore
    from skillstate.server.storage.records import Right
    from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
    from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

    store = SqliteCredentialStore(db_path)
    server = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", skills=SqliteSkillStore(db_path),
                                credentials=store, auth=Mode.REQUIRED)  # fmt: skip
    try:
        rights = {Right.ADMIN, Right.PUBLISH, Right.READ, Right.WRITE, Right.REGISTRY}
        tokens = {"environment": (await issue(store, "environment", ["*"], rights=rights)).token}
        await register_library(f"127.0.0.1:{server.port}", tokens["environment"])
        for skill in ("stockroom-receiving", "stockroom-shipping", "stockroom-maintenance"):
            agent = f"{skill}-0"
            tokens[agent] = (await issue(store, agent, ["*"], [skill], rights={Right.READ, Right.WRITE})).token
        (tmp_path / "tokens.json").write_text(json.dumps(tokens))
        code, out, err = await skillstate(
            server, "sim", "warehouse", "--agents-per-skill", "1", "--processes", "--horizon", "8", "--tick-ms", "50",
            "--think-ms", "20", "--deadline", "100", "--tokens", str(tmp_path / "tokens.json"), "--out", str(tmp_path),
            "--rezip",
        )  # fmt: skip
        assert code == 0, err
        run = json.loads((tmp_path / "results.json").read_text())["runs"][0]
        assert (run["agents_per_skill"], run["handled_on_time"], run["duplicate_actions"]) == (1, 8, 0)
        assert run["state_drift"] == [] and "| skillstate (claims) | 1 | 8/8 |" in out
        assert set(run["agents_ended"].values()) == {"finished"}  # not stalled by a slow exit after its report
        steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
        agents = {step["agent"] for step in steps}
        assert agents <= set(tokens) - {"environment"} and len(agents) >= 2  # written by the processes themselves
        told = run["rezip"]  # each process reported, over its own hydration
        assert list(told["expanded"]) == [agent for agent in tokens if agent != "environment"]
        assert (told["errors"], len(set(told["reported"]))) == ([], 3)
        expanded = any(step["outcome"] == "expand" for step in steps)  # receiving's P shows the macro
        assert bool(told["expanded"]["stockroom-receiving-0"]) == expanded
        assert list((await evidence(db_path)).values()) == [(1, int(expanded), 0)]
    finally:
        await server.stop(grace=0)


async def test_agents_at_once_are_asked_for_as_the_issue_says(tmp_path: Path) -> None:
    code, _, err = await skillstate(None, "sim", "warehouse", "--agents", "1", "--agents-per-skill", "2",
                                    "--out", str(tmp_path))  # fmt: skip
    assert code == 2 and "--agents and --agents-per-skill are exclusive" in err
    code, _, err = await skillstate(None, "sim", "warehouse", "--agents-per-skill", "2", "--runtime", "react",
                                    "--out", str(tmp_path))  # fmt: skip
    assert code == 2 and "react cannot run agents at once" in err
    code, _, err = await skillstate(None, "sim", "warehouse", "--runtime", "skillstate,clever", "--out", str(tmp_path))
    assert code == 2 and "--runtime: unknown clever" in err


async def test_rezip_is_refused_beside_the_baselines_and_in_the_demo(tmp_path: Path) -> None:
    code, _, err = await skillstate(None, "sim", "warehouse", "--rezip", "--runtime", "all", "--out", str(tmp_path))
    assert code == 2 and "--rezip: reports revise the library's macros" in err and "--runtime skillstate alone" in err
    code, _, err = await skillstate(None, "sim", "warehouse", "--rezip", "--agents-per-skill", "2", "--runtime",
                                    "skillstate,groupchat", "--out", str(tmp_path))  # fmt: skip
    assert code == 2 and "--runtime skillstate alone" in err
    code, _, err = await skillstate(None, "demo", "--rezip", "--out", str(tmp_path))
    assert code == 2 and "unrecognized arguments: --rezip" in err


async def test_agents_at_once_feed_rezip_each_over_its_own_p(
    server: RunningServer, db_path: Path, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{server.port}"
    await register_library(address)
    code, out, err = await skillstate(
        server, "sim", "warehouse", "--agents-per-skill", "2", "--rezip", "--horizon", "12", "--tick-ms", "50",
        "--think-ms", "50", "--deadline", "40", "--lease", "6", "--contention", "0", "--out", str(tmp_path),
    )  # fmt: skip
    # no contention: no action fails for a pair, so no macro fails its check
    assert code == 0, err
    told = json.loads((tmp_path / "results.json").read_text())["runs"][0]["rezip"]
    assert (told["errors"], told["revisions"], len(set(told["reported"]))) == ([], [], 6)
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    expanding = {step["agent"] for step in steps if step["outcome"] == "expand"}
    assert {agent for agent, macros in told["expanded"].items() if macros} == expanding
    assert f"ReZip, skillstate (claims) x2: 6 hydrations reported by 6 agents, {len(expanding)} of them" in out
    assert list((await evidence(db_path)).values()) == [(2, len(expanding), 0)], "a use per receiving agent"


async def test_sim_calls_a_model_over_http_and_a_run_that_overflows_its_context_fails_alone(tmp_path: Path) -> None:
    """`--model openai/... --api-base URL`, as a user points sim at vLLM or Ollama: every call goes over
    litellm's HTTP client to a local OpenAI-compatible server (answering as the test policy). Past a context
    window the server refuses the transcript runtime's growing prompt: that run fails, with its reason in
    results.json and the notes, and the skillstate run, whose prompt stays small, is kept."""
    with OpenAIServer(context_window=6_000).running() as model:
        code, out, err = await skillstate(
            None, "sim", "warehouse", "--agents", "1", "--horizon", "30", "--runtime", "skillstate,react",
            "--model", "openai/scripted", "--api-base", model.api_base, "--api-key", "local",
            "--out", str(tmp_path),
        )  # fmt: skip
    assert code == 1, err
    results = json.loads((tmp_path / "results.json").read_text())
    assert [run["runtime"] for run in results["runs"]] == ["skillstate"] and results["runs"][0]["score"] == 1.0
    (failed,) = results["failed"]
    assert failed["runtime"] == "react" and "ContextWindowExceededError" in failed["error"], failed
    assert "The react run (T=30, seed 0, 1 agent) failed" in out and "| 30 | skillstate |" in out
    assert {seen.body["model"] for seen in model.requests} == {"scripted"} and len(model.requests) > 30
