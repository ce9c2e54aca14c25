"""How long a restarted skill registry takes before it serves, beside the paper's build measure.

    python bench/registry_start.py                    # the real corpus and 1K synthetic skills
    python bench/registry_start.py --sizes 1000 10000

A registry keeps packages in its store, and beside them each one's graph record (server/skills/records.py):
the first start after the packages were registered (or after an upgrade) reads every stored package, loads it
(front matter, sections) and builds its graph (Sec2Graph), keeping the records; later starts decode the
records instead. Then it indexes the library and runs MotifZip; every call waits until it is done
(`SkillRegistry.ready`). The paper measures construction "from cached records, excluding model-assisted
extraction": indexes and MotifZip only. This bench stores each library in a fresh SQLite store (untimed),
then times, in one process,
- the first start, from `start()` until `ready()` returns (no records yet: it makes and keeps them);
- the next start over the same store (from the records);
- the parts of a start without records, on the same packages: reading the store (`current()`), loading the
  packages, Sec2Graph (which counts each section's tokens, kept in the record), and the paper's measure (each
  skill's terms and indexes, then MotifZip, as the registry does), each from cold caches, as the restart
  starts.
One line of progress per step on stderr; a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from skill_build import cold_caches
from skill_registry import corpus_library
from synthetic import generate_library

from skillstate.server.skills.bulk import fewer_collections
from skillstate.server.skills.graph import SkillGraph, build_graph
from skillstate.server.skills.library import SkillLibrary, node_words
from skillstate.server.skills.macro_index import MacroIndex
from skillstate.server.skills.package import SkillPackage, load_package
from skillstate.server.skills.registry import SkillRegistry
from skillstate.server.skills.tokens import count_tokens
from skillstate.server.storage.records import SkillVersion
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

T = TypeVar("T")


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def timed(name: str, work: Callable[[], T]) -> tuple[float, T]:
    cold_caches()
    gc.collect()
    started = time.perf_counter()
    with fewer_collections():  # as the registry's start does
        value = work()
    seconds = time.perf_counter() - started
    progress(f"{name}: {seconds:.2f} s")
    return seconds, value


async def store_library(path: Path, packages: list[SkillPackage]) -> None:
    store = SqliteSkillStore(path)
    await store.open()
    try:
        for package in packages:
            await store.add(SkillVersion(package.name, 1, package.digest, package.folder, time.time(), package.files))
    finally:
        await store.close()


async def restart(path: Path) -> float:
    registry = SkillRegistry(SqliteSkillStore(path))
    cold_caches()
    gc.collect()
    started = time.perf_counter()
    await registry.start()
    await registry.ready()
    seconds = time.perf_counter() - started
    await registry.close()
    progress(f"restart, start() to ready(): {seconds:.2f} s")
    return seconds


async def read_store(path: Path) -> list[SkillVersion]:
    store = SqliteSkillStore(path)
    await store.open()
    try:
        return await store.current()
    finally:
        await store.close()


def paper_build(graphs: list[SkillGraph]) -> None:
    """Indexes and MotifZip from the graphs (cached records), as the registry builds them."""
    library, rebuild = SkillLibrary(), MacroIndex().rebuilding()
    for graph in sorted(graphs, key=lambda g: g.skill):
        words = node_words(graph)
        skill = library.add(graph, 1, words)
        rebuild.add(graph, skill.node_tokens, words)
    library.settle()
    rebuild.finish()


def measure(label: str, packages: list[SkillPackage]) -> dict[str, Any]:
    progress(f"{label}: {len(packages):,} skills")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "skills.db"
        asyncio.run(store_library(path, packages))
        first = asyncio.run(restart(path))
        total = asyncio.run(restart(path))
        read, stored = timed("reading the store", lambda: asyncio.run(read_store(path)))
    load, loaded = timed("loading the packages", lambda: [load_package(s.files, s.folder) for s in stored])
    graph, graphs = timed("Sec2Graph", lambda: [build_graph(p) for p in loaded])
    build, _ = timed("the paper's measure: indexes and MotifZip", lambda: paper_build(graphs))
    return {"library": label, "skills": len(packages), "first": first, "restart": total, "read": read,
            "load": load, "graph": graph, "build": build}  # fmt: skip


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| library | skills | first start s (makes records) | next start s (from records) | reading the store s "
        "| loading s | Sec2Graph s | indexes + MotifZip s (the paper's measure) | the paper's measure / next start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['library']} | {r['skills']:,} | {r['first']:.2f} | {r['restart']:.2f} | {r['read']:.2f} "
            f"| {r['load']:.2f} | {r['graph']:.2f} | {r['build']:.2f} | {r['build'] / r['restart']:.0%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000], help="synthetic library sizes")
    parser.add_argument("--no-corpus", action="store_true", help="synthetic libraries only")
    args = parser.parse_args()
    count_tokens("")  # the tokenizer loads once per process, as a server's does at start
    results = []
    if not args.no_corpus:
        packages, _ = corpus_library()
        results.append(measure("real corpus", packages))
    for size in args.sizes:
        packages = [load_package(s.files, s.folder) for s in generate_library(size, seed=1, references=True)]
        results.append(measure("synthetic", packages))
    print(table(results))


if __name__ == "__main__":
    main()
