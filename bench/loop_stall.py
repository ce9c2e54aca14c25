"""How long the largest allowed request of each RPC holds the server's event loop, and what one identity's
flood does to another's calls.

    python bench/loop_stall.py            # a 10,000-skill library (about 10 minutes, most of it loading it)
    python bench/loop_stall.py --quick    # 1,000 skills

The server is `skillstate serve` in its own process, with credentials (so identities are real). A prober,
in a process of its own and as an identity of its own, reads a small execution back to back for the whole
run. Each case sends one RPC's largest allowed input (4 MiB state, 1 MiB patch, deepest schema, 4 MiB skill
package, a hydration over the whole library, text merges of 1 KB to 1 MB) while the prober reads; the
prober's slowest read during the case is the longest stall the case caused another client (target under
50 ms), printed beside the same figure while the server is idle, measured in the same run. The flood case
keeps 600 unary calls of one identity in flight and reports the prober's median (target under 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import grpc
from state_server import spawn
from synthetic import generate_library

from skillstate.clients import SkillRegistryClient, SkillstateError, StateClient
from skillstate.server.auth.credentials import issue
from skillstate.server.storage.backends import open_credential_store
from skillstate.server.storage.records import Right, SkillVersion
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

CLI = [sys.executable, "-m", "skillstate.cli"]
MIB = 1 << 20
TARGET_MS = 50.0
FLOOD_IN_FLIGHT = 600
GROUPS = ["state", "listing", "text", "observation", "skill", "flood"]


def issue_token(db: Path, agent: str) -> str:
    issued = subprocess.run(
        [*CLI, "auth", "issue", "--db", str(db), "--agent", agent, "--executions", "*", "--rights",
         "read,write,publish,admin,registry"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return str(json.loads(issued.stdout)["token"])


async def issue_agent_tokens(db: Path, count: int) -> list[str]:
    """Tokens of `count` writing agents (the listing's executions name them all), issued in one go."""
    store = open_credential_store(str(db))
    await store.open()
    try:
        return [(await issue(store, f"agent-{n:03d}", ["listed-*"], [], [Right.WRITE, Right.READ])).token
                for n in range(count)]  # fmt: skip
    finally:
        await store.close()


def probe(address: str, token: str, stop: multiprocessing.synchronize.Event, results: Connection) -> None:
    """Read the probe execution back to back until told to stop; send (start, seconds) of every read."""

    async def run() -> list[tuple[float, float]]:
        samples = []
        async with StateClient(address, token=token) as client:
            while not stop.is_set():
                started = time.monotonic()
                await client.get_state("probe")
                samples.append((started, time.monotonic() - started))
        return samples

    results.send(asyncio.run(run()))


@dataclass
class Window:
    case: str
    started: float
    ended: float
    calls: int


class Cases:
    """The cases, each run while the prober reads; every case records the window it ran in."""

    def __init__(
        self, state: StateClient, skills: SkillRegistryClient, library_size: int, agent_tokens: list[str], address: str
    ) -> None:
        self.state, self.skills, self.library_size = state, skills, library_size
        self.agent_tokens, self.address = agent_tokens, address
        self.windows: list[Window] = []

    async def run(self, case: str, work: Callable[[], Awaitable[object]], calls: int = 1) -> None:
        started = time.monotonic()
        for _ in range(calls):
            await work()
        self.windows.append(Window(case, started, time.monotonic(), calls))
        print(f"  {case}: {time.monotonic() - started:.2f} s", file=sys.stderr, flush=True)

    async def all(self, groups: list[str], flood_token: str, address: str) -> None:
        await self.run("idle", lambda: asyncio.sleep(3))
        for group in groups:
            if group == "flood":
                await self.flood(flood_token, address)
            else:
                await getattr(self, f"{group}_cases")()
        await self.run("idle, again", lambda: asyncio.sleep(3))

    async def state_cases(self) -> None:
        state = self.state
        deep: dict[str, object] = {"type": "string"}
        for level in range(30):  # two JSON levels each (object, properties): 62 deep, under the limit of 64
            deep = {"type": "object", "properties": {f"level{level}": deep}, "x-merge": "lww"}
        wide = {f"member{i}": {"type": "string", "maxLength": 200} for i in range(5000)}
        schema = {"type": "object", "properties": {"deep": deep, **wide}}
        initial = {f"member{i}": "x" * 180 for i in range(5000)}  # ~1 MiB, each member validated
        await self.run("CreateExecution: 230 KiB schema 62 deep, 1 MiB state", lambda: state.create_execution(
            "wide", schema=schema, initial_state=initial))  # fmt: skip
        lww = {"type": "object", "additionalProperties": {"x-merge": "lww"}}
        await state.create_execution("big", schema=lww, initial_state={})
        for n in range(1, 4):
            await self.run(f"SubmitPatch: 1 MiB patch at head (state {n} MiB)", lambda n=n: state.submit_patch(
                "big", {f"k{n}": "x" * (MIB - 100)}, agent_id="bench", base_revision=n - 1))  # fmt: skip
        await self.run("GetState: a 3 MiB state", lambda: state.get_state("big"), calls=5)
        head = (await state.get_state("big")).revision
        await self.run("SubmitPatch: 1 MiB lww merge on a stale base (3 MiB state)", lambda: state.submit_patch(
            "big", {"k1": "y" * (MIB - 100)}, agent_id="bench", base_revision=head - 2))  # fmt: skip
        async with state.session("big", agent_id="bench", receive_observations=False) as session:
            await self.run("Session: a 1 MiB patch at head over a session (3 MiB state)", lambda: session.submit(
                {"k3": "z" * (MIB - 100)}, base_revision=head + 1))  # fmt: skip
        head += 1  # the session's revision, for the watch below
        await state.create_execution("many", initial_state={})
        await self.run("Session: 64 agents x 1 in flight, 50 submits each (group commits on the loop)",
                       lambda: _session_agents(state, "many", 64, 50))  # fmt: skip
        await self.run("Watch: from revision 0 over 4 MiB of revisions", lambda: _take(state.watch("big", 0), head + 1))
        await self.run("GetHistory: every revision of 1 MiB each", lambda: _all(state.history("big")))
        await self.run("Compact", lambda: state.compact("big", 0))
        await self.run("DeleteExecution: 4 MiB of revisions", lambda: state.delete_execution("big"))

    async def listing_cases(self) -> None:
        state = self.state
        for number in range(1000):  # the largest page, each execution naming as many agents as a summary may
            await state.create_execution(f"listed-{number:04d}", initial_state={})

        async def agent(n: int, token: str) -> None:  # each agent commits once to every execution
            async with StateClient(self.address, token=token) as client:
                for number in range(1000):
                    await client.submit_patch(f"listed-{number:04d}", {"seen": 1}, agent_id=f"agent-{n:03d}",
                                              base_revision=0)  # fmt: skip

        await asyncio.gather(*(agent(n, token) for n, token in enumerate(self.agent_tokens)))
        await self.run("ListExecutions: a page of 1,000 executions naming 100 agents each",
                       lambda: state.list_executions("listed-", page_size=1000), calls=3)  # fmt: skip

    async def text_cases(self) -> None:
        text = {"type": "object", "properties": {"doc": {"type": "string", "x-merge": "text"}}}
        for label, size in (("1 KB", 1000), ("100 KB", 100_000), ("1 MB", 1_000_000)):
            execution = f"text-{size}"
            lines = [f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(size // 50)]
            doc = "".join(lines)[:size]
            await self.state.create_execution(execution, schema=text, initial_state={"doc": doc})
            await self.state.submit_patch(
                execution, {"doc": "A new first line\n" + doc}, agent_id="bench", base_revision=0
            )
            await self.run(
                f"SubmitPatch: text merge of two edits of {label}",
                lambda e=execution, d=doc: self.state.submit_patch(
                    e, {"doc": d + "A new last line\n"}, agent_id="bench", base_revision=0
                ),
            )

    async def observation_cases(self) -> None:
        await self.state.create_execution("events", initial_state={})
        await self.run("PublishObservation: 1 MiB payload", lambda: self.state.publish_observation(
            "events", "*", {"blob": "x" * (MIB - 100)}), calls=3)  # fmt: skip
        await self.run("StreamObservations: from 0 over 3 MiB", lambda: _take(
            self.state.observations("events", "bench", after_sequence=0), 3))  # fmt: skip

    async def skill_cases(self) -> None:
        skills = self.skills
        await self.run(
            "RegisterSkill: 500 sections and 3 MiB of references", lambda: skills.register_skill(big_package())
        )
        await self.run(f"Hydrate: over {self.library_size:,} skills", lambda: skills.hydrate(
            "reconcile the ledger in SAP for EMEA", budget_tokens=3000), calls=10)  # fmt: skip
        hydrated = await skills.hydrate("reconcile the ledger in SAP for EMEA", budget_tokens=3000)
        if hydrated.macros:
            macro = hydrated.macros[0].macro_id
            await self.run("Expand: one macro", lambda: skills.expand(hydrated.hydration_id, macro))
        await self.run("ReportOutcome", lambda: skills.report_outcome(hydrated.hydration_id, success=True))
        await self.run("GetLibraryStats", skills.library_stats)
        await self.run("ListSkills: every page of 1,000", lambda: _all(skills.list_skills(page_size=1000)))
        big = "big-package"
        await self.run("GetSkill: that package's graph", lambda: skills.get_skill(big))
        await self.run("GetSkill: with its 3 MiB of files", lambda: skills.get_skill(big, include_files=True))
        await self.run("RemoveSkill", lambda: skills.remove_skill("big-package"))

    async def flood(self, token: str, address: str) -> None:
        lww = {"type": "object", "additionalProperties": {"x-merge": "lww"}}
        await self.state.create_execution("flood", schema=lww, initial_state={})
        for n in range(1, 4):  # a 3 MiB state, as large as the state cases' "big" (which they delete)
            await self.state.submit_patch("flood", {f"k{n}": "x" * (MIB - 100)}, agent_id="bench", base_revision=n - 1)
        async with StateClient(address, token=token) as flooder:
            stop = asyncio.Event()
            turned_away = 0

            async def keep_one_in_flight() -> None:
                nonlocal turned_away
                while not stop.is_set():
                    try:
                        await flooder.get_state("flood")
                    except SkillstateError as e:  # the flooder's own calls may wait past their deadline: its cost
                        if e.status not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED):
                            raise
                        turned_away += 1

            workers = [asyncio.ensure_future(keep_one_in_flight()) for _ in range(FLOOD_IN_FLIGHT)]
            await self.run(f"another identity keeps {FLOOD_IN_FLIGHT} calls in flight", lambda: asyncio.sleep(5))
            stop.set()
            await asyncio.gather(*workers)
            print(f"  the flooder's calls past their deadline or refused: {turned_away}", file=sys.stderr)


def big_package() -> dict[str, bytes]:
    """A package as large as one may be: a SKILL.md of 500 sections (the limit: steps count as sections)
    and three reference files of 1 MiB."""
    groups = "".join(
        f"## Step group {i}\n\n1. Open the file `data/{i}.csv` and check its header.\n2. Save the result as "
        f"`out/{i}.csv`.\n\nIf it fails, retry once and report the error.\n\n"
        for i in range(166)
    )
    skill = f"---\nname: big-package\ndescription: A package as large as the limits allow.\n---\n# Big\n\n{groups}"
    files = {"big-package/SKILL.md": skill.encode()}
    for i in range(3):
        text = f"# Part {i}\n\n" + "Reference text. " * 70_000
        files[f"big-package/references/part{i}.md"] = text.encode()[: MIB - 1]
    return files


async def _session_agents(state: StateClient, execution: str, agents: int, submits: int) -> None:
    """`agents` sessions of the credential's agent, each submitting a member of its own one patch at a time
    against the newest revision."""
    latest = [0]

    async def agent(index: int) -> None:
        async with state.session(execution, agent_id="bench", receive_observations=False) as session:
            for n in range(submits):
                result = await session.submit({f"agent-{index}": n}, base_revision=latest[0])
                latest[0] = max(latest[0], result.revision)

    await asyncio.gather(*(agent(i) for i in range(agents)))


async def _take(stream: object, count: int) -> None:
    async for _ in stream:  # type: ignore[attr-defined]
        count -= 1
        if count == 0:
            return


async def _all(stream: object) -> None:
    async for _ in stream:  # type: ignore[attr-defined]
        pass


async def fill_library(db: Path, size: int) -> None:
    """Store the synthetic library straight into the skill store: the server builds it once at start."""
    store = SqliteSkillStore(db)
    await store.open()
    try:
        for skill in generate_library(size, seed=1):
            await store.add(SkillVersion(skill.name, 1, skill.name, skill.folder, time.time(), skill.files))
    finally:
        await store.close()


async def wait_until_ready(skills: SkillRegistryClient) -> None:
    """Every registry call waits until the library is built (a minute or more at 10,000 skills)."""
    started = time.monotonic()
    while True:
        try:
            await skills.library_stats()
            return
        except SkillstateError as e:
            if "DEADLINE_EXCEEDED" not in str(e):
                raise
            print(f"  library still loading after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def table(windows: list[Window], samples: list[tuple[float, float]]) -> str:
    idle = [seconds for started, seconds in samples if _inside(started, windows[0])]
    idle_worst, idle_median = max(idle) * 1000, statistics.median(idle) * 1000
    lines = [
        "| case | calls | another client's slowest read, ms | its median, ms | its reads over 50 ms | "
        "idle slowest / median, ms | target 50 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for window in windows:
        during = [seconds * 1000 for started, seconds in samples if _inside(started, window)]
        if not during:
            lines.append(f"| {window.case} | {window.calls} | (no read) | | | | |")
            continue
        worst, median = max(during), statistics.median(during)
        over = sum(1 for ms in during if ms > TARGET_MS)
        figure = median if "in flight" in window.case else worst
        verdict = "met" if figure < TARGET_MS else "MISSED"
        lines.append(
            f"| {window.case} | {window.calls} | {worst:.1f} | {median:.1f} | {over} of {len(during)} | "
            f"{idle_worst:.1f} / {idle_median:.1f} | "
            f"{verdict} |"
        )
    return "\n".join(lines)


def _inside(started: float, window: Window) -> bool:
    return window.started <= started <= window.ended


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 1,000-skill library")
    parser.add_argument("--library", type=int, default=None, help="skills in the library (default 10,000)")
    parser.add_argument("--cases", nargs="*", default=GROUPS, choices=GROUPS, help="which groups of cases to run")
    args = parser.parse_args()
    size = args.library or (1000 if args.quick else 10_000)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "stall.db"
        print(f"storing a {size:,}-skill library", file=sys.stderr, flush=True)
        await fill_library(db, size)
        tokens = {agent: issue_token(db, agent) for agent in ("bench", "prober", "flooder")}
        agent_tokens = await issue_agent_tokens(db, 100 if "listing" in args.cases else 0)
        process, address, _ = await spawn(*CLI, "serve", "--db", str(db), "--listen", "127.0.0.1:0")
        try:
            async with (
                StateClient(address, token=tokens["bench"]) as state,
                SkillRegistryClient(address, token=tokens["bench"]) as skills,
            ):
                print("waiting for the server to build the library", file=sys.stderr, flush=True)
                await wait_until_ready(skills)
                await state.create_execution("probe", initial_state={"n": 0})
                context = multiprocessing.get_context("spawn")
                stop, (receive, send) = context.Event(), context.Pipe(duplex=False)
                prober = context.Process(target=probe, args=(address, tokens["prober"], stop, send))
                prober.start()
                cases = Cases(state, skills, size, agent_tokens, address)
                try:
                    await asyncio.sleep(1)  # the prober connects and warms up before the idle window opens
                    await cases.all(args.cases, tokens["flooder"], address)
                finally:
                    stop.set()
                samples = receive.recv()
                prober.join()
        finally:
            process.terminate()
            await process.wait()
    print(table(cases.windows, samples))


if __name__ == "__main__":
    asyncio.run(main())
