"""Agents as OS processes of their own (`TeamConfig(processes=True)`, `skillstate sim --processes`): proof that
the agents of a team share nothing in memory, only the server.

The parent writes each agent's spec (address, token, execution, skill, its P, model and coordination) to a
JSON file and starts `python -m skillstate.agents.sims.workers SPEC`. The worker runs one TeamAgent with its own
client, writes every model call to its own JSONL file, prints `ready` once the run's start reached its stream,
and at the end prints one JSON line: how it ended, what coordination cost it and, with `rezip`, what it told
ReZip (it hydrated its own P with its own client then: team_rezip.py). A worker that is killed (a stalled
agent, at the end of the run) leaves the model calls it had written.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillstate.clients import ClientTLS, SkillRegistryClient, StateClient, open_channel

from ..runtime.contexts import SkillState
from ..runtime.records import Limits, Recorder, StepRecord
from ..teams.agent import AgentDied, Coordination, TeamAgent
from .team_rezip import own_context
from .team_setup import Team, TeamConfig, policy_options

DIED = 3
"""The exit code of a worker whose agent died (the `die` fault)."""
EXIT_GRACE = 1.0
"""Seconds a worker gets to exit after its closing line: tearing down an interpreter with litellm loaded can
take longer than a run's `finish_wait` on a busy machine, and the agent would be counted stalled."""


async def start_processes(
    address: str,
    execution_id: str,
    config: TeamConfig,
    contexts: Mapping[str, tuple[str, tuple[str, ...] | None]],
    tokens: Mapping[str, str],
    tls: ClientTLS | None,
    recorder: Recorder,
) -> Team:
    """Start one worker per agent of `config` and return the Team of their processes."""
    folder = Path(tempfile.mkdtemp(prefix="skillstate-workers-"))
    ends: dict[str, dict[str, Any]] = {}
    tasks: dict[asyncio.Future[Any], str] = {}
    readiness: list[asyncio.Future[None]] = []
    for agent_id in config.agent_ids:
        skill = agent_id.rpartition("-")[0]
        spec = {
            "address": address, "token": tokens.get(agent_id), "execution_id": execution_id, "agent_id": agent_id,
            "skill": skill, "instructions": contexts[skill][0], "reads": contexts[skill][1],
            "model": config.model_of(agent_id), "policy_options": policy_options(config),
            "limits": dataclasses.asdict(config.limits), "records": str(folder / f"{agent_id}.jsonl"),
            "tls_ca": tls.root_certificates.decode() if tls and tls.root_certificates else None,
            "coordination": dataclasses.asdict(config.coordination_of(agent_id)), "transport": config.transport,
            "rezip": config.rezip, "context_budget": config.context_budget,
        }  # fmt: skip
        path = folder / f"{agent_id}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skillstate.agents.sims.workers", str(path),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        started = asyncio.get_running_loop().create_future()
        readiness.append(started)
        tasks[asyncio.ensure_future(_watch(process, agent_id, started, ends))] = agent_id

    def counts() -> dict[str, int]:
        summed: dict[str, int] = {}
        for agent_id in config.agent_ids:
            records = Path(folder / f"{agent_id}.jsonl")
            if records.exists():
                for line in records.read_text(encoding="utf-8").splitlines():
                    recorder.add(StepRecord(**json.loads(line)))
            for key, value in ends.get(agent_id, {}).get("counts", {}).items():
                summed[key] = summed.get(key, 0) + value
        return summed

    async def ready() -> None:
        await asyncio.gather(*readiness)

    def told() -> dict[str, dict[str, Any]]:
        return {agent_id: ends[agent_id]["rezip"] for agent_id in config.agent_ids if "rezip" in ends.get(agent_id, {})}

    return Team(tasks, counts, ready, told)


async def _watch(
    process: asyncio.subprocess.Process, agent_id: str, ready: asyncio.Future[None], ends: dict[str, dict[str, Any]]
) -> str:
    """Follow one worker to its end: its `ready` line, then its closing line (once printed, the worker has done
    and reported everything: it gets EXIT_GRACE seconds to exit, then is killed); killed if cancelled."""
    assert process.stdout is not None
    try:
        async for line in process.stdout:
            text = line.decode().strip()
            if text == "ready" and not ready.done():
                ready.set_result(None)
            elif text.startswith("{"):
                ends[agent_id] = json.loads(text)
                break
        try:
            code = await asyncio.wait_for(process.wait(), EXIT_GRACE if agent_id in ends else None)
        except TimeoutError:
            process.kill()
            code = await process.wait()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if not ready.done():
        ready.set_exception(RuntimeError(f"agent {agent_id}'s process ended before the run started (exit {code})"))
    if agent_id in ends:
        return str(ends[agent_id].get("ended", "finished"))
    if code == DIED:
        raise AgentDied(f"{agent_id}'s process died (a test fault)")
    raise RuntimeError(f"agent {agent_id}'s process failed with exit code {code}")


async def _work(spec: dict[str, Any]) -> int:
    from ..runtime.llm import _litellm

    _litellm()  # before the run starts: the import takes seconds
    tls = ClientTLS(spec["tls_ca"].encode()) if spec["tls_ca"] else None
    recorder = Recorder(Path(spec["records"]))
    channel = open_channel(spec["address"], token=spec["token"], tls=tls)
    try:
        instructions, reads, feedback = spec["instructions"], spec["reads"], None
        if spec["rezip"]:
            registry = SkillRegistryClient(channel=channel)
            instructions, reads, feedback = await own_context(registry, spec["agent_id"], spec["context_budget"])
        agent = TeamAgent(
            StateClient(channel=channel), spec["execution_id"], spec["agent_id"], skills=[spec["skill"]],
            instructions=instructions, model=spec["model"], context=SkillState(), recorder=recorder,
            limits=Limits(**spec["limits"]), reads=reads, policy_options=spec["policy_options"],
            coordination=Coordination(**spec["coordination"]), transport=spec["transport"], feedback=feedback,
        )  # fmt: skip
        running = asyncio.ensure_future(agent.run())
        ready = asyncio.ensure_future(agent.ready.wait())
        await asyncio.wait([running, ready], return_when=asyncio.FIRST_COMPLETED)
        if ready.done():
            print("ready", flush=True)
        try:
            await running
        except AgentDied:
            recorder.close()
            return DIED
        finally:
            ready.cancel()
    finally:
        await channel.close()
    recorder.close()
    told = {"rezip": feedback.summary()} if feedback is not None and feedback.told else {}
    print(json.dumps({"ended": agent.ended, "counts": dict(agent.counts)} | told), flush=True)
    return 0


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    raise SystemExit(asyncio.run(_work(spec)))


if __name__ == "__main__":
    main()
