"""ReZip fed by agents: macro levels changing from the outcomes real runs report.

Over a synthetic library with macros (bench/synthetic.py), agents with `--rezip` (the scripted test policy)
run episodes whose step needs a routine their P shows only in summary: each asks for the macro's text, the
runtime expands it and reports the episode's outcome, and ReZip raises the macro's level as docs/skills.md
says (expanded in half of at least three uses). Halfway the server restarts: the counts go on. Then a check
outside the agents (as a CI job running the routine would) reports verifier failures through the SDK, which
raise one macro to full and split it. A macro shown in the same contexts that no step needs is the control:
its uses are counted, nothing expands it, and its level stays.

    python bench/rezip.py                       # 40 skills, 12 agent episodes (about 20 s)
    python bench/rezip.py --skills 200 --episodes 24

One line of progress per step on stderr; at the end a Markdown table of each macro's level at each stage.
The agents are the scripted TEST POLICY: the figures show ReZip acting on reported outcomes, not a model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("SKILLSTATE_OFFLINE", "1")

from synthetic import generate_library

from skillstate.agents import SCRIPTED, Agent, MacroFeedback, Recorder, SkillState
from skillstate.agents.protocol.prompts import render_observation
from skillstate.clients import Hydrated, HydratedMacro, SkillRegistryClient, StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

STEP = re.compile(r",? step \d+$")
Where = tuple[str, int, int]
"""A macro occurrence's place, (skill, first section, sections): its id may change when a restart recompresses."""


def where(macro: HydratedMacro) -> Where:
    return macro.skill, macro.first_index, macro.section_count


@dataclass
class Tracked:
    """A macro the bench follows, through a task whose context shows it."""

    role: str
    """`needed` (the agents' steps need it), `failing` (needed, then its check fails) or `control`."""
    query: str
    place: Where
    name: str
    levels: dict[str, str] = field(default_factory=dict)
    """stage -> the level the task's context shows it at: `split` once evidence split it, `-` when no macro
    holds it whole otherwise (a restart compresses the library in full, which may cut it otherwise)"""
    split: bool = False
    uses: int = 0
    expanded: int = 0
    failed: int = 0


class Server:
    """A server in this process on one SQLite file, stopped and started again on the same port."""

    def __init__(self, db: Path) -> None:
        self.db, self.port = db, 0
        self.running: RunningServer | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.running = await start_server(
            SqliteRevisionLog(self.db), self.address, EngineConfig(), SqliteSkillStore(self.db)
        )
        self.port = self.running.port

    async def stop(self) -> None:
        if self.running is not None:
            await self.running.stop(grace=0)


def progress(step: int, text: str) -> None:
    print(f"step {step:>3}: {text}", file=sys.stderr, flush=True)


async def level_of(skills: SkillRegistryClient, tracked: Tracked) -> str:
    hydrated = await skills.hydrate(tracked.query)
    shown = [m.level for m in hydrated.macros if where(m) == tracked.place]
    return shown[0] if shown else "split" if tracked.split else "-"


async def choose(skills: SkillRegistryClient, queries: list[str]) -> list[Tracked]:
    """A macro the agents' steps need, with a control shown at its contract beside it in the same context; and
    one of several sections, also needed, whose check will then fail (so that its split is one)."""
    pair: list[Tracked] = []
    failing: Tracked | None = None
    for query in queries:
        hydrated = await skills.hydrate(query)
        summarized = [m for m in hydrated.macros if m.level == "contract"]
        single = [m for m in summarized if m.section_count == 1]
        if not pair and len(single) >= 2:
            needed, control = single[:2]
            pair = [Tracked("needed", query, where(needed), STEP.sub("", needed.name)),
                    Tracked("control", query, where(control), STEP.sub("", control.name))]  # fmt: skip
        if failing is None and (long := [m for m in summarized if m.section_count > 1]):
            failing = Tracked("failing", query, where(long[0]), STEP.sub("", long[0].name))
        if pair and failing is not None:
            return [*pair, failing]
    raise SystemExit("the library has too few macros shown in summary: try more --skills")


async def episode(address: str, query: str, event: Mapping[str, Any]) -> tuple[MacroFeedback, Recorder, Hydrated]:
    """One agent with `--rezip` over the task's P: one step on the event, then the end, then the report."""
    async with StateClient(address) as client, SkillRegistryClient(address) as registry:
        hydrated = await registry.hydrate(query)
        feedback = MacroFeedback(registry, [hydrated])
        execution = await client.create_execution(schema={"type": "object"}, initial_state={})
        recorder = Recorder()
        agent = Agent(
            client, execution.execution_id, "worker", skills=["synthetic"], instructions=hydrated.context,
            model=SCRIPTED, context=SkillState(), recorder=recorder, feedback=feedback,
        )  # fmt: skip
        for payload in (event, {"done": True}):
            await agent.step(render_observation(payload), final=bool(payload.get("done")))
        await agent.report_outcome()
    return feedback, recorder, hydrated


def count(tracked: list[Tracked], hydrated: Hydrated, feedback: MacroFeedback) -> None:
    """What the report said about each tracked macro the context showed (here or in another skill: evidence
    is counted per macro, whichever of its occurrences a context shows)."""
    expanded = set().union(*feedback.expanded.values())
    failed = set().union(*feedback.failed.values())
    for t in tracked:
        shown = {m.macro_id for m in hydrated.macros if STEP.sub("", m.name) == t.name}
        t.uses += bool(shown)
        t.expanded += bool(shown & expanded)
        t.failed += bool(shown & failed)


async def run(args: argparse.Namespace) -> tuple[list[Tracked], list[str], float]:
    library = generate_library(args.skills, seed=args.seed)
    queries = [skill.task.rsplit(" (", 1)[0] for skill in library]
    stages: list[str] = []
    reports: list[float] = []
    step = 0
    with tempfile.TemporaryDirectory(prefix="skillstate-rezip-") as folder:
        server = Server(Path(folder) / "rezip.db")
        await server.start()
        try:
            async with SkillRegistryClient(server.address) as skills:
                for skill in library:
                    await skills.register_skill(skill.files, folder=skill.folder)
                tracked = await choose(skills, queries)

            async def stage(name: str) -> None:
                stages.append(name)
                async with SkillRegistryClient(server.address) as skills:
                    for t in tracked:
                        t.levels[name] = await level_of(skills, t)

            await stage("registered")
            needed = [t for t in tracked if t.role != "control"]
            for n in range(args.episodes):
                if n == args.episodes // 2:
                    await stage(f"after {n} episodes")
                    await server.stop()
                    await server.start()
                    step += 1
                    progress(step, "the server restarts (evidence and kept hydrations are in its database)")
                    await stage("after the restart")
                target = needed[n % len(needed)]
                started = time.perf_counter()
                event = {"event": f"follow the {target.name.lower()} routine now"}
                feedback, recorder, hydrated = await episode(server.address, target.query, event)
                reports.append(time.perf_counter() - started)
                count(tracked, hydrated, feedback)
                step += 1
                asked = [r.action for r in recorder.records if r.outcome == "expand"]
                revised = ", ".join(f"{r.macro_id} -> {r.level or 'split'}" for r in feedback.revisions) or "nothing"
                progress(step, f"agent episode on {target.name!r}: {', '.join(asked) or 'no expansion'}; "
                               f"reported, revised {revised}")  # fmt: skip
            await stage(f"after {args.episodes} episodes")
            failing = next(t for t in tracked if t.role == "failing")
            async with SkillRegistryClient(server.address) as skills:
                while not failing.split and (level := await level_of(skills, failing)) != "-":
                    hydrated = await skills.hydrate(failing.query)
                    (macro,) = [m for m in hydrated.macros if where(m) == failing.place]
                    revisions = await skills.report_outcome(
                        hydrated.hydration_id, success=False, failed_macro_ids=[macro.macro_id]
                    )
                    failing.uses, failing.failed = failing.uses + 1, failing.failed + 1
                    failing.split = any(r.level is None for r in revisions)
                    step += 1
                    revised = ", ".join(f"{r.macro_id} -> {r.level or 'split'}" for r in revisions) or "nothing"
                    progress(step, f"SDK: {failing.name!r} (shown {level}) failed its check; revised {revised}")
            await stage("after the failures")
            await server.stop()
            await server.start()
            step += 1
            progress(step, "the server restarts")
            await stage("after a restart")
        finally:
            await server.stop()
    return tracked, stages, 1000 * sorted(reports)[len(reports) // 2]


def table(tracked: list[Tracked], stages: list[str]) -> str:
    lines = [
        "| macro | role | " + " | ".join(stages) + " | uses / expanded / failed reported |",
        "|---|---|" + "---|" * len(stages) + "---|",
    ]
    for t in tracked:
        levels = " | ".join(t.levels[s] for s in stages)
        sections = f"{t.place[2]} section{'s' if t.place[2] > 1 else ''}"
        lines.append(f"| {t.name} ({t.place[0]} §{t.place[1]}, {sections}) | {t.role} | {levels} "
                     f"| {t.uses} / {t.expanded} / {t.failed} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=40, help="skills in the synthetic library")
    parser.add_argument("--episodes", type=int, default=12, help="agent episodes (the server restarts halfway)")
    parser.add_argument("--seed", type=int, default=5, help="the library's seed")
    args = parser.parse_args()
    tracked, stages, median_ms = asyncio.run(run(args))
    print(table(tracked, stages))
    print(
        f"\nLevels as the task's context shows each macro; a block whose summary would be no shorter than its text "
        f"shows in full (the progress lines give the levels evidence decided); `-`: no macro holds it whole (a "
        f"restart compresses the library in full, which may cut it otherwise). Thresholds (docs/skills.md): a macro "
        f"expanded in half of at least 3 uses, or whose verifier failed, rises one level (contract, outline, full); "
        f"at full, 2 more verifier failures split it. Uses count every context that showed the macro. Library: "
        f"{args.skills} synthetic skills (seed {args.seed}); {args.episodes} agent episodes of the scripted TEST "
        f"POLICY, median {median_ms:.0f} ms each (hydrate, one step with its expansion, the end, the report)."
    )


if __name__ == "__main__":
    main()
